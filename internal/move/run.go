package move

import (
	"context"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// run is the state of one Run.
type run struct {
	p    Pass
	mode mode
	ch   *amqp.Channel
	conn *amqp.Connection
	// conf publishes and acknowledges the moves; nil for a read-only pass.
	conf *confirmer
	res  Result
	held []uint64 // delivery tags to requeue at the end
	// lastTag is the highest delivery tag received.
	lastTag uint64
	// lastAck is when moves were last acknowledged, and Progress (with
	// UntilEmpty) done with it: an ack frees room in the window, so the
	// broker may send more from then on.
	lastAck time.Time
	// generations holds the first delivery tag of each consumer.
	generations []uint64
	closed      chan *amqp.Error
	fatal       error
	dead        bool // the channel is gone: the broker requeued everything
	ctxDone     bool
	// exhausted: the queue has nothing more for the pass, or consuming failed.
	exhausted bool
	limit     int
	consumer  int // consumers on the queue when the pass started
}

// open opens the pass's channel, reads the queue's depth and sets the
// channel up; a pass with nothing to do leaves r.limit 0.
func (r *run) open() error {
	p := r.p
	ch, err := r.conn.Channel()
	if err != nil {
		return fmt.Errorf("opening a channel: %w", err)
	}
	r.ch = ch
	q, err := ch.QueueDeclarePassive(p.Queue, false, false, false, false, nil)
	if err != nil {
		return p.QueueError(p.Queue, err)
	}
	r.res.Depth, r.consumer = q.Messages, q.Consumers
	if q.Messages == 0 {
		return nil
	}
	r.limit = r.mode.limit(p, q.Messages)
	if p.Target != "" {
		r.conf, err = newConfirmer(ch, p.Queue, p.Target, p.Window)
		if err != nil {
			return err
		}
		r.conf.onAck = r.acked
		r.conf.onGiveUp = func(tag uint64) {
			r.held = append(r.held, tag)
			r.res.Failed++
		}
	}
	r.closed = ch.NotifyClose(make(chan *amqp.Error, 1))
	if err := ch.Qos(p.Window, 0, false); err != nil {
		return fmt.Errorf("setting prefetch: %w", err)
	}
	return nil
}

// acked counts n more moves acknowledged.
func (r *run) acked(n int) {
	r.res.Moved += n
	r.mode.acked(r)
	r.lastAck = time.Now()
}

func (r *run) stopping() bool {
	return r.fatal != nil || r.dead || r.ctxDone || r.res.Stopped != ""
}

// halted reports whether the pass takes no more deliveries. A pass that
// stops early on a queue that requeues to its tail (quorum) still takes
// every message up to its limit, without acting on them, because requeueing
// only the head would move it behind the rest. A move until empty stops at
// once: it leaves nothing in place.
func (r *run) halted() bool {
	return r.dead || r.exhausted || (r.stopping() && (r.p.InPlaceRequeue || r.mode.stopsAtOnce()))
}

func (r *run) taken() int { return r.res.Scanned + r.res.Unexamined }

// scan consumes until the pass has taken its limit or halts, one consumer
// (a generation) after another.
//
// A scan only cancels a consumer when no delivery can still be on its way
// to it: when it holds a full window, or when the queue has no ready
// message and nothing came for a while. A move until empty cancels it to
// learn that (see consumer.drain). Should a delivery still reach the
// channel after cancel-ok, the client drops it: it would stay
// unacknowledged without the pass knowing it, and run.see requeues it by
// its delivery tag.
func (r *run) scan(ctx context.Context) {
	for gen := 0; r.taken() < r.limit && !r.halted(); gen++ {
		c, ok := r.consume(gen)
		if !ok {
			return
		}
		c.run(ctx)
	}
}

// takesNoMore reports whether the pass takes nothing more from its
// current consumer.
func (r *run) takesNoMore() bool { return r.taken() >= r.limit || r.halted() }

// outstanding counts the moves in flight: published, not yet acked or
// given up.
func (r *run) outstanding() int {
	if r.conf == nil {
		return 0
	}
	return r.conf.outstanding()
}

// see notes a delivery tag. The channel numbers deliveries 1, 2, 3... in
// the order it sends them, which is the order the pass receives them: a
// gap is a delivery the client dropped (see scan), requeued by its tag.
func (r *run) see(tag uint64) {
	for next := r.lastTag + 1; next < tag; next++ {
		r.held = append(r.held, next)
		r.res.Unexamined++
		r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("delivery %d of the pass never reached it; it was requeued unexamined", next))
	}
	r.lastTag = max(r.lastTag, tag)
}

// examine decides one delivery and, to move it, publishes its copy; else
// it holds it for requeue.
func (r *run) examine(d *amqp.Delivery) {
	r.res.Scanned++
	dec := Decision{Move: true}
	if r.p.Decide != nil {
		dec = r.p.Decide(r.res.Scanned, d)
	}
	if r.conf == nil || !dec.Move {
		r.held = append(r.held, d.DeliveryTag)
		r.res.Left++
		if dec.Note != "" {
			if r.res.LeftBy == nil {
				r.res.LeftBy = map[string]int{}
			}
			r.res.LeftBy[dec.Note]++
		}
	} else {
		if err := r.conf.publish(d.DeliveryTag, r.p.Rewrite(d), r.p.SettleTimeout); err != nil {
			r.fail(err)
		}
		if r.p.MaxMoves > 0 && r.res.Moved+r.conf.outstanding() >= r.p.MaxMoves && r.res.Stopped == "" {
			r.res.Stopped = "moved the limit of " + count(r.p.MaxMoves, "message", "messages")
		}
	}
	r.mode.examined(r)
}

func (r *run) progress() {
	if r.p.Progress != nil {
		r.p.Progress(r.res)
	}
}

func (r *run) fail(err error) {
	if r.fatal == nil {
		r.fatal = err
	}
}

func (r *run) channelGone(e *amqp.Error, ok bool) {
	r.dead = true
	if r.conf != nil {
		r.conf.lost(nil)
	}
	if ok && e != nil {
		r.fail(fmt.Errorf("the broker closed the channel: %w; every unacknowledged message went back to queue %q", e, r.p.Queue))
	} else {
		r.fail(fmt.Errorf("the channel closed; every unacknowledged message went back to queue %q", r.p.Queue))
	}
}

// count is n and its noun in number, as internal/english.Count words it:
// internal/move brings its importers nothing of rmqtopo's beyond contract,
// so it cannot import that package.
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
