package e2e

import (
	"math/bits"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/spec"
)

// levels returns the delay ladder q's retries go through, if its layout is
// levels.
func (x *example) levels(q spec.Queue) (contract.Ladder, bool) {
	s := &x.file.Spec
	if q.Preset != spec.PresetNone || (q.Layout != spec.LayoutLevels && (q.Layout != "" || s.Layout != spec.LayoutLevels)) {
		return contract.Ladder{}, false
	}
	return s.Ladder()
}

// nativeRetryKey is the routing key of a native retry due after delay: the
// work queue's name, or, through a ladder, the delay's bits before it (as
// retry.WithLevels writes it).
func (x *example) nativeRetryKey(t *testing.T, q spec.Queue, delay time.Duration) string {
	l, ok := x.levels(q)
	if !ok {
		return q.Name
	}
	key, err := l.RoutingKey(delay, q.Name)
	if err != nil {
		t.Fatalf("queue %q: %v", q.Name, err)
	}
	return key
}

// levelsRoute is how a retry through a ladder reaches the work queue,
// keeping its routing key, having waited once in each level whose bit is
// set, highest first. It was last published (dead-lettered) to the stage
// below the lowest such level. The latest x-death entry is that level,
// entered from the retry exchange if it was the only one, else from the
// stage the level above dead-lettered into.
func (c *chain) levelsRoute(l contract.Ladder, step spec.Step) route {
	steps, _ := l.Steps(step.Delay)
	if steps == 0 {
		return route{Exchange: c.lastExchange, RoutingKey: c.lastKey}
	}
	lowest := bits.TrailingZeros64(steps)
	from := c.lastExchange
	if above := steps &^ (1 << lowest); above != 0 {
		from = l.Next(bits.TrailingZeros64(above))
	}
	return route{Exchange: l.Next(lowest), RoutingKey: c.lastKey, Death: &death{
		Queue: l.LevelQueue(lowest), Reason: "expired", Exchange: from,
		RoutingKeys: []string{c.lastKey}, Count: 1, Entries: bits.OnesCount64(steps)}}
}

// checkLadder checks that every level queue of the ladder is on the broker
// with its TTL, dead-lettering to the level below.
func (x *example) checkLadder(t *testing.T, l contract.Ladder) {
	t.Helper()
	for k := range l.Levels {
		live, ok := x.live.Queue(x.vhost, l.LevelQueue(k))
		if !ok {
			t.Errorf("level %d of the ladder, %s, is not on the broker", k, l.LevelQueue(k))
			continue
		}
		want := []any{l.TTL(k).Milliseconds(), l.Next(k)}
		got := []any{live.Arguments["x-message-ttl"], live.Arguments["x-dead-letter-exchange"]}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("TTL and dead-letter exchange of %s (-want +got):\n%s", l.LevelQueue(k), diff)
		}
	}
}
