package plan_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

// TestDiffKeepsDrainingLadder: after a change of levels, apply --prune
// keeps the retired ladder whole (stage exchanges, their bindings, the
// empty levels below, the delivery exchange and dead end) while one of
// its level queues still holds messages; only the retry exchange's binding
// into it goes, so new delays take the new ladder. Once every level is
// empty, the ladder is deleted.
func TestDiffKeepsDrainingLadder(t *testing.T) {
	const queues = "queues: [{name: a, retry: {delays: [2s]}, layout: levels}]\n"
	live := expand(t, "version: 1\nlevels: {resolution: 1s, max: 3s}\n"+queues)
	desired := expand(t, "version: 1\nlevels: {resolution: 500ms, max: 3s}\n"+queues)
	old, _ := contract.NewLadder(1e9, 3e9)
	q0, q1 := topology.Address{Kind: topology.KindQueue, Vhost: "/", Name: old.LevelQueue(0)}, topology.Address{Kind: topology.KindQueue, Vhost: "/", Name: old.LevelQueue(1)}
	dlq := topology.Address{Kind: topology.KindQueue, Vhost: "/", Name: old.DeadLetterQueue()}
	ofOld := func(p plan.Plan) []string {
		var out []string
		for _, r := range rows(p, true) {
			if strings.Contains(r, old.Name()) {
				out = append(out, r)
			}
		}
		return out
	}
	opts := plan.Options{Prune: true, Owned: owned(live), IsWaitQueue: contract.IsWaitQueue,
		Messages: map[topology.Address]int64{q0: 0, q1: 3, dlq: 0}}
	kept := "# kept with retired delay ladder rmqtopo.levels.1s.2 while its level queues drain; deleted by a later apply once they are empty"
	want := []string{
		`no-op exchange "rmqtopo.levels.1s.2.deliver" in vhost "/" ` + kept,
		`no-op exchange "rmqtopo.levels.1s.2.dlx" in vhost "/" ` + kept,
		`no-op exchange "rmqtopo.levels.1s.2.x1" in vhost "/" ` + kept,
		`no-op exchange "rmqtopo.levels.1s.2.x2" in vhost "/" ` + kept,
		`no-op queue "rmqtopo.levels.1s.2.dlq" in vhost "/" ` + kept + ` [messages=0]`,
		`no-op queue "rmqtopo.levels.1s.2.q0.1s" in vhost "/" ` + kept + ` [messages=0]`,
		`no-op queue "rmqtopo.levels.1s.2.q1.2s" in vhost "/" # retired wait queue draining: 3 messages waiting; deleted by a later apply once empty [messages=3] [draining]`,
		`delete binding "a.retry -> rmqtopo.levels.1s.2.x2" [exchange key="" args={rmqtopo-attempt: "2", x-match: "all"}] in vhost "/" # not in spec`,
	}
	if diff := cmp.Diff(want, ofOld(plan.DiffTopology(live, desired, opts))); diff != "" {
		t.Errorf("a level draining (-want +got):\n%s", diff)
	}

	opts.Messages[q1] = 0
	got := ofOld(plan.DiffTopology(live, desired, opts))
	deletes := 0
	for _, r := range got {
		if strings.HasPrefix(r, "delete ") {
			deletes++
		}
	}
	// 4 exchanges, 3 queues and the retry binding; the ladder's own
	// bindings go with its exchanges.
	if deletes != 8 || len(got) != 8 {
		t.Errorf("every level empty: want the ladder deleted:\n%s", strings.Join(got, "\n"))
	}
}
