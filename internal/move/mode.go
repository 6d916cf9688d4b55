package move

import (
	"context"
	"fmt"
	"math"
	"time"
)

// mode is what a scan and a move until empty (Pass.UntilEmpty) do
// differently; the run does the rest alike.
type mode interface {
	// limit is how many messages the pass takes of a queue of depth.
	limit(p Pass, depth int) int
	// idleAfter is how long a consumer goes without a delivery before the
	// pass settles its moves and asks the queue for more.
	idleAfter() time.Duration
	// stopsAtOnce: a pass that stops takes no more deliveries, whatever
	// the queue requeues to; it leaves nothing in place.
	stopsAtOnce() bool
	// examined and acked follow a delivery examined and n moves
	// acknowledged; each mode reports its progress at one of them.
	examined(r *run)
	acked(r *run)
	// quiet runs once the consumer had no delivery for quiet and the
	// pass's moves are settled: it ends the pass, or lets it wait.
	quiet(c *consumer, quiet time.Duration)
	// ended follows the end of the consumer's deliveries.
	ended(ctx context.Context, c *consumer)
	// settle ends the pass: requeue what it holds, or not.
	settle(ctx context.Context, r *run)
}

func modeOf(p Pass) mode {
	if p.UntilEmpty {
		return untilEmpty{}
	}
	return scanning{}
}

// scanning examines up to its limit, moves some messages and leaves the
// others in place, in order.
type scanning struct{}

func (scanning) limit(p Pass, depth int) int {
	if p.Scan > 0 && p.Scan < depth {
		return p.Scan
	}
	return depth
}

// A scan waits longer than a move until empty: its end is known (its
// limit).
func (scanning) idleAfter() time.Duration         { return 250 * time.Millisecond }
func (scanning) stopsAtOnce() bool                { return false }
func (scanning) examined(r *run)                  { r.progress() }
func (scanning) acked(*run)                       {}
func (scanning) ended(context.Context, *consumer) {}

// quiet waits a second for more unless the pass takes no more; then, if
// the queue has nothing ready or nothing came for a minute, the pass ends
// with the reason.
func (scanning) quiet(c *consumer, quiet time.Duration) {
	r := c.r
	if !r.takesNoMore() && quiet < time.Second {
		return
	}
	ready, _, err := r.peekQueue()
	switch {
	case err != nil:
		r.fail(err)
	case ready == 0:
		if !r.takesNoMore() && r.res.Stopped == "" {
			r.res.Stopped = fmt.Sprintf("the queue ran out of ready messages after %d of %d (consumed or expired elsewhere)", r.taken(), r.limit)
		}
	case quiet > time.Minute:
		r.res.Stopped = "no delivery for a minute although the queue has ready messages"
	default:
		return
	}
	r.exhausted = true
	c.cancel()
}

// settle requeues the held messages in order before the channel closes.
func (scanning) settle(ctx context.Context, r *run) { r.requeue(ctx) }

// untilEmpty moves every message, those that arrive meanwhile too, until
// the queue is drained (see consumer.drain).
type untilEmpty struct{}

func (untilEmpty) limit(Pass, int) int { return math.MaxInt }

// A move until empty asks the queue sooner than a scan: the answer only
// tells it when to check that it is drained, which takes a round trip and
// proves it (see consumer.drain).
func (untilEmpty) idleAfter() time.Duration { return 50 * time.Millisecond }
func (untilEmpty) stopsAtOnce() bool        { return true }
func (untilEmpty) examined(*run)            {}
func (untilEmpty) acked(r *run)             { r.progress() }

// quiet asks the queue at once, and if it has no ready message checks
// that it is drained: deliveries on their way do not count as ready.
func (untilEmpty) quiet(c *consumer, quiet time.Duration) {
	r := c.r
	ready, consumers, err := r.peekQueue()
	switch {
	case err != nil:
		r.fail(err)
	case ready == 0:
		c.drain(max(consumers-1, 0)) // the others, besides this consumer
		return
	case quiet > time.Minute:
		r.res.Stopped = "no delivery for a minute although the queue has ready messages"
	default:
		return
	}
	r.exhausted = true // the pass just ends: its channel closes
}

// ended checks whether the queue is drained after the pass's cancel; the
// broker cancelling the move itself (its queue was deleted) is an error.
func (untilEmpty) ended(ctx context.Context, c *consumer) {
	switch {
	case c.draining:
		c.r.checkDrained(ctx, c.others)
	case !c.cancelled:
		c.r.fail(fmt.Errorf("the broker cancelled the move from queue %q", c.r.p.Queue))
	}
}

// settle leaves the channel to close: closing it gives back every
// unacknowledged message, and other consumers make the queue's counts
// say nothing about the pass's acks (a migration waits for the queue
// itself before deleting it).
func (untilEmpty) settle(context.Context, *run) {}
