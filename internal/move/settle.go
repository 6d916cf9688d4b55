package move

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"
)

// checkDrained ends a move until empty if its queue has no ready message
// once the cancelled consumer's deliveries are moved and settled; else the
// next consumer takes over.
func (r *run) checkDrained(ctx context.Context, others int) {
	r.flush()
	if r.stopping() {
		return
	}
	if r.res.Left > 0 {
		// A quorum queue counts a consumer until its messages are settled:
		// those Decide left keep the pass's counted, whatever came back.
		others = math.MaxInt
	}
	ready, err := r.settledReady(ctx, others)
	switch {
	case err != nil:
		r.fail(err)
	case ready == 0:
		r.exhausted = true
	}
}

// settledReady reads the queue's ready count once the broker has settled
// the messages of the pass's cancelled consumer. A quorum queue applies
// acks asynchronously, and so the returns of the deliveries the channel
// had not passed on when the cancel came: until then they are neither
// ready nor gone, and the queue still counts the consumer. A classic queue
// drops the consumer at once, and its count of ready messages does not
// wait for acks. So it polls until the queue counts no more consumers than
// the others it had, at most SettleTimeout: past it (another client's
// consumer came) it answers anyway, with a warning.
func (r *run) settledReady(ctx context.Context, others int) (int, error) {
	deadline := time.NewTimer(r.p.SettleTimeout)
	defer deadline.Stop()
	for {
		ready, consumers, err := r.peekQueue()
		if err != nil || consumers <= others {
			return ready, err
		}
		select {
		case <-ctx.Done():
			r.ctxDone = true
			return ready, nil
		case <-deadline.C:
			r.res.Warnings = append(r.res.Warnings, fmt.Sprintf(
				"queue %q still had %s %s after the move cancelled its own (%d others before): whether it was drained was judged on its ready messages alone",
				r.p.Queue, count(consumers, "consumer", "consumers"), r.p.SettleTimeout, others))
			return ready, nil
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// flush waits for the confirms of the moves in flight, then acks the
// confirmed sources. An interrupt does not cut the wait short: the copies
// are already on their way, and acking their sources now saves duplicates.
// SettleTimeout bounds it.
func (r *run) flush() {
	if r.conf == nil || r.dead {
		return
	}
	if err := r.conf.flush(r.p.SettleTimeout); err != nil {
		r.fail(err)
	}
}

// finish settles the pass: the moves in flight are confirmed and acked,
// held messages are requeued in delivery order, and the channel is closed
// only once the broker has settled all of it. A move until empty closes
// its channel once its moves are settled (see Pass.UntilEmpty).
func (r *run) finish(ctx context.Context) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.p.SettleTimeout)
	defer cancel()
	r.flush()
	select {
	case e, ok := <-r.closed:
		r.channelGone(e, ok)
	default:
	}
	if r.dead {
		r.res.Warnings = append(r.res.Warnings, "the channel closed before the end of the pass: the broker requeued the messages it held, possibly out of order")
		return
	}
	r.mode.settle(fctx, r)
	r.ch.Close()
}

// requeue requeues the held messages and waits for the broker to settle
// them. Delivery tags grow with delivery order, which is queue order. A
// quorum queue applies the requeues of one consumer in order, but not
// those of several: each consumer's are requeued, and applied, before the
// next one's.
func (r *run) requeue(ctx context.Context) {
	readyBefore, _, err := r.peekQueue()
	if err != nil {
		r.fail(err)
	}
	slices.Sort(r.held)
	wait := err == nil
	requeued := 0
	for g := range r.generations {
		end := len(r.held)
		if g+1 < len(r.generations) {
			end, _ = slices.BinarySearch(r.held, r.generations[g+1])
		}
		for _, tag := range r.held[requeued:end] {
			if err := r.ch.Nack(tag, false, true); err != nil {
				r.fail(fmt.Errorf("requeueing messages of queue %q: %w", r.p.Queue, err))
				return
			}
		}
		if wait && end > requeued && end < len(r.held) {
			wait = r.awaitSettled(ctx, readyBefore+end, false)
		}
		requeued = end
	}
	if wait {
		// Acks settle like requeues: wait for those too.
		r.awaitSettled(ctx, readyBefore+len(r.held), true)
	}
}

// awaitSettled polls the queue until the broker has applied every ack and
// requeue of the pass. A quorum queue settles them asynchronously and
// keeps counting a cancelled consumer until all its messages are settled,
// so both the ready count and the consumer count tell.
//
// With last false it only waits for wantReady ready messages.
func (r *run) awaitSettled(ctx context.Context, wantReady int, last bool) bool {
	for {
		ready, consumers, err := r.peekQueue()
		if err != nil {
			r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("could not check that the broker settled the pass: %v", err))
			return false
		}
		if ready >= wantReady && (!last || consumers <= r.consumer) {
			return true
		}
		select {
		case <-ctx.Done():
			r.res.Warnings = append(r.res.Warnings, fmt.Sprintf(
				"the broker had not settled every ack and requeue after %s; closing anyway, so some moved messages may come back to queue %q as duplicates and left ones may change order",
				r.p.SettleTimeout, r.p.Queue))
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// peekQueue reads a queue's ready and consumer counts with a passive
// declare on a channel of its own, because a failed declare closes the
// channel it runs on.
func (r *run) peekQueue() (ready, consumers int, err error) {
	ch, err := r.conn.Channel()
	if err != nil {
		return 0, 0, fmt.Errorf("opening a channel: %w", err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(r.p.Queue, false, false, false, false, nil)
	if err != nil {
		return 0, 0, r.p.QueueError(r.p.Queue, err)
	}
	return q.Messages, q.Consumers, nil
}
