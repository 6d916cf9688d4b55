package broker_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/apply"
	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/spec"
)

// TestLadderChangeLosesNothing changes the levels key, with prune, while
// messages wait in the old ladder: the old ladder is kept whole while
// they pass down through it, every message reaches the work queue, and
// once the old levels are empty a pruning apply deletes the old ladder.
func TestLadderChangeLosesNothing(t *testing.T) {
	t.Parallel()
	l := newLive(t)
	const specFmt = "version: 1\nlevels: {resolution: %s, max: 30s}\nqueues:\n  - {name: work, type: quorum, retry: {delays: [24s]}, layout: levels}\n"
	before := spec.Expand(parseFor(t, "before.yaml", []byte(fmt.Sprintf(specFmt, "2s")), l.vhost))
	after := spec.Expand(parseFor(t, "after.yaml", []byte(fmt.Sprintf(specFmt, "1s")), l.vhost))
	old, _ := contract.NewLadder(2*time.Second, 30*time.Second)
	l.converge(t, before, true)
	// With every count known, as on a broker that has run for a while, the
	// plan decides on counts, not on unknowns.
	l.statsReady(t, before)

	// 24s = 1100 in steps of 2s: level 3 (16s), then level 2 (8s).
	key, err := old.RoutingKey(24*time.Second, "work")
	if err != nil {
		t.Fatal(err)
	}
	const n = 10
	publish(t, l.b.Dial(t, l.vhost), old.EntryExchange(), key, nil, n)
	start := time.Now()
	// The plan reads counts from the statistics: wait until they show
	// the messages in level 3 and level 2 empty, as they would long after
	// a publish.
	l.statsCount(t, old.LevelQueue(3), n)

	p, st := l.plan(t, after, true)
	for _, c := range changes(p) {
		if strings.HasPrefix(c, "delete") && strings.Contains(c, old.Name()) && !strings.Contains(c, "work.retry") {
			t.Errorf("the plan deletes part of the draining ladder: %s", c)
		}
	}
	if _, err := apply.Apply(context.Background(), l.s, p, apply.Options{Records: plan.OwnRecords(st, l.specs())}); err != nil {
		t.Fatal(err)
	}
	// Messages still wait in level 3 (16s), so the apply ran while they
	// did: what the test is about; one is enough. The statistics wait and
	// the apply take about 5s on a quiet machine (logged); no clock is
	// asserted.
	t.Logf("plan and apply %s after the publish", time.Since(start).Round(time.Millisecond))
	if got := l.b.QueueDepth(t, l.vhost, old.LevelQueue(3)); got == 0 {
		t.Logf("%s was empty right after the apply: on a machine this slow the test proves only that nothing is lost", old.LevelQueue(3))
	}
	// The messages' 24 s in the ladder, counted from their publish.
	waitFor(t, waitguard.For(24*time.Second), "every message in the work queue", func() bool {
		return l.b.QueueDepth(t, l.vhost, "work") >= n
	})
	if got := l.b.QueueDepth(t, l.vhost, "work"); got != n {
		t.Errorf("work holds %d messages, want exactly %d", got, n)
	}

	// Once the statistics see the old levels empty, a plan deletes the
	// whole old ladder.
	waitFor(t, waitguard.For(statsWait), "a plan deleting the old ladder, its queues known to be empty", func() bool {
		p, st = l.plan(t, after, true)
		for _, c := range p.Changes {
			if c.DestroysQueue() && (c.Messages() == nil || *c.Messages() != 0) {
				return false
			}
		}
		return strings.Contains(strings.Join(changes(p), "\n"), "delete exchange "+old.EntryExchange())
	})
	if _, err := apply.Apply(context.Background(), l.s, p, apply.Options{Records: plan.OwnRecords(st, l.specs())}); err != nil {
		t.Fatal(err)
	}
	again, st := l.plan(t, after, true)
	if diff := cmp.Diff([]string(nil), changes(again)); diff != "" {
		t.Errorf("final plan (-want +got):\n%s", diff)
	}
	for _, q := range st.Topology.Queues {
		if strings.HasPrefix(q.Name, old.Name()) {
			t.Errorf("%s still exists", q.Name)
		}
	}
}

// TestLadderPruneDeletesBoundExchanges prunes whole ladders, whose
// exchanges are bound to each other, several times over. RabbitMQ 3.10
// crashes the channel (AMQP 541) when two exchanges bound to each other
// are deleted at the same time, so apply deletes exchanges one at a time.
func TestLadderPruneDeletesBoundExchanges(t *testing.T) {
	t.Parallel()
	l := newLive(t)
	const withLadder = "version: 1\nlevels: {resolution: 100ms, max: 1h}\nqueues:\n  - {name: work, type: quorum, retry: {delays: [1s]}, layout: levels}\n"
	const without = "version: 1\nqueues:\n  - {name: work, type: quorum, retry: {delays: [1s]}}\n"
	for round := range 3 {
		l.converge(t, spec.Expand(parseFor(t, "ladder.yaml", []byte(withLadder), l.vhost)), true)
		p := l.converge(t, spec.Expand(parseFor(t, "plain.yaml", []byte(without), l.vhost)), true)
		deleted := 0
		for _, c := range p.Changes {
			if c.Action == plan.Delete && strings.HasPrefix(c.Address.Name, "rmqtopo.levels.") {
				deleted++
			}
		}
		if deleted == 0 {
			t.Fatalf("round %d: the prune deleted no ladder object:\n%s", round, strings.Join(changes(p), "\n"))
		}
	}
}
