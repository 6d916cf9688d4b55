package ops

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/broker"
)

// Decision is what a pass does with one message.
type Decision struct {
	Move bool
	// Note says why a message is left in place ("filter", "below
	// threshold", NoteUnreadable...); Result.LeftBy counts the notes.
	Note string
}

// Pass is one scan of a queue that moves some messages to a target queue
// and leaves every other message in place, in order. See the package
// documentation for how and why.
type Pass struct {
	// Queue is scanned; Target receives moved messages, through the default
	// exchange. An empty Target makes a read-only pass (a peek).
	Queue, Target string
	// Scan bounds the messages examined; 0 means the queue's depth when the
	// pass starts, so a pass never examines a message twice.
	Scan int
	// MaxMoves stops the pass after that many moves; 0 means no limit.
	MaxMoves int
	// Window is the most deliveries held at once (the consumer prefetch).
	Window int
	// InPlaceRequeue says the queue puts a requeued message back where it
	// was (classic queues). Otherwise (quorum queues put it at their tail,
	// and unknown types are treated alike) a pass that stops early still
	// takes the rest of the queue, untouched, so that requeueing everything
	// in order keeps the order.
	InPlaceRequeue bool
	// Decide is called once per examined message, in queue order, with its
	// 1-based position.
	Decide func(position int, d *amqp.Delivery) Decision
	// Rewrite builds the copy published to Target; nil copies the message
	// (see Copy).
	Rewrite func(d *amqp.Delivery) amqp.Publishing
	// Progress, if set, is called after each examined message.
	Progress func(Result)
	// SettleTimeout bounds the wait for outstanding confirms and for the
	// broker to settle acks and requeues at the end; 0 means 30s.
	SettleTimeout time.Duration
}

// DefaultWindow is the default number of deliveries a pass holds at once.
const DefaultWindow = 1000

// FormatProgress renders a pass's progress for stderr.
func FormatProgress(r Result, elapsed time.Duration) string {
	verb := "moved"
	if r.Target == "" {
		verb = "read"
	}
	n := r.Moved
	if r.Target == "" {
		n = r.Scanned
	}
	return fmt.Sprintf("%s: examined %d of %d, %s %d, left %d, failed %d (%s)",
		r.Queue, r.Scanned, r.Depth, verb, n, r.Left, r.Failed, elapsed.Round(time.Second))
}

// QueueNotFoundError says a queue does not exist.
type QueueNotFoundError struct{ Queue string }

func (e *QueueNotFoundError) Error() string { return fmt.Sprintf("queue %q not found", e.Queue) }

type pendingMove struct {
	tag uint64
	dc  *amqp.DeferredConfirmation
}

// passRun is the state of one Run.
type passRun struct {
	p    Pass
	ch   *amqp.Channel
	conn *amqp.Connection
	res  Result
	held []uint64 // delivery tags to requeue at the end
	seen []uint64 // every delivery tag received
	// generations holds the first delivery tag of each consumer.
	generations []uint64
	pending     []pendingMove
	returns     chan amqp.Return
	closed      chan *amqp.Error
	batch       int
	fatal       error
	dead        bool // the channel is gone: the broker requeued everything
	ctxDone     bool
	// exhausted: the queue has nothing more for the pass, or consuming failed.
	exhausted bool
	limit     int
	consumer  int // consumers on the queue when the pass started
}

// Run runs the pass on a channel of its own over conn.
//
// Messages are consumed with manual acks and a prefetch of Window. A
// message to move is published to Target (persistent, mandatory, in
// confirm mode) and acked in the source only after the broker confirmed
// the copy; any other outcome keeps it unacked. Messages left in place are
// held unacked until the end of the pass, then requeued one by one in
// delivery order. When a consumer holds a full window of messages, it is
// cancelled (its deliveries stay held) and a new one takes the next window,
// so memory stays bounded by Window whatever the queue's depth. Before closing its channel, Run waits until the broker has
// settled every ack and requeue: closing earlier makes a quorum queue
// return unsettled messages out of order, and acked ones as duplicates.
func (p Pass) Run(ctx context.Context, conn *amqp.Connection) (Result, error) {
	if p.Window <= 0 {
		p.Window = DefaultWindow
	}
	if p.Window > 65535 {
		p.Window = 65535 // prefetch-count is a 16-bit field
	}
	if p.SettleTimeout <= 0 {
		p.SettleTimeout = 30 * time.Second
	}
	if p.Rewrite == nil {
		p.Rewrite = Copy
	}
	r := &passRun{p: p, conn: conn, res: Result{Queue: p.Queue, Target: p.Target}}
	if p.Target != "" && p.Target == p.Queue {
		return r.res, fmt.Errorf("cannot move messages of queue %q to itself", p.Queue)
	}
	ch, err := conn.Channel()
	if err != nil {
		return r.res, fmt.Errorf("opening a channel: %w", err)
	}
	r.ch = ch
	started := false
	defer func() {
		if !started {
			ch.Close()
		}
	}()
	q, err := ch.QueueDeclarePassive(p.Queue, false, false, false, false, nil)
	if err != nil {
		return r.res, queueError(p.Queue, err)
	}
	r.res.Depth, r.consumer = q.Messages, q.Consumers
	r.limit = q.Messages
	if p.Scan > 0 && p.Scan < r.limit {
		r.limit = p.Scan
	}
	if r.limit == 0 {
		return r.res, nil
	}
	r.batch = max(1, p.Window/4)
	if p.Target != "" {
		if err := ch.Confirm(false); err != nil {
			return r.res, fmt.Errorf("confirm mode: %w", err)
		}
		// A return precedes the confirm of its publish, and the pass drains
		// returns after each batch of at most r.batch publishes: the buffer
		// never fills, so the client never drops one.
		r.returns = ch.NotifyReturn(make(chan amqp.Return, r.batch+1))
	}
	r.closed = ch.NotifyClose(make(chan *amqp.Error, 1))
	if err := ch.Qos(p.Window, 0, false); err != nil {
		return r.res, fmt.Errorf("setting prefetch: %w", err)
	}
	started = true // finish closes the channel once the broker settled the pass
	r.scan(ctx)
	r.finish(ctx)
	if r.fatal == nil && r.ctxDone {
		r.fatal = fmt.Errorf("interrupted: %w", context.Cause(ctx))
	}
	return r.res, r.fatal
}

func (r *passRun) stopping() bool {
	return r.fatal != nil || r.dead || r.ctxDone || r.res.Stopped != ""
}

// halted reports whether the pass takes no more deliveries. A pass that
// stops early on a queue that requeues to its tail (quorum) still takes
// every message up to its limit, without acting on them, because requeueing
// only the head would move it behind the rest.
func (r *passRun) halted() bool {
	return r.dead || r.exhausted || (r.stopping() && r.p.InPlaceRequeue)
}

func (r *passRun) taken() int { return r.res.Scanned + r.res.Unexamined }

// scan consumes until the pass has taken its limit or halts, one consumer
// (a generation) after another.
//
// A consumer is only cancelled when no delivery can still be on its way to
// it: when it holds a full window, or when the queue has no ready message
// and nothing came for a while. A quorum queue's deliveries can reach the
// channel after cancel-ok, and the client drops deliveries for a cancelled
// consumer; such a message would stay unacknowledged without the pass
// knowing it (finish still requeues it, by delivery tag).
func (r *passRun) scan(ctx context.Context) {
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
func (r *passRun) takesNoMore() bool { return r.taken() >= r.limit || r.halted() }

// consumer is one generation of a pass's consumers.
type consumer struct {
	r          *passRun
	tag        string
	deliveries <-chan amqp.Delivery
	// delivered counts the deliveries to this consumer, movedBefore the
	// pass's moves when it started.
	delivered, movedBefore int
	cancelled              bool
	lastDelivery           time.Time
}

// consume starts the consumer of generation gen; on failure the pass is
// exhausted.
func (r *passRun) consume(gen int) (*consumer, bool) {
	tag := fmt.Sprintf("rmqtopo-pass-%d", gen)
	deliveries, err := r.ch.Consume(r.p.Queue, tag, false, false, false, false, nil)
	if err != nil {
		r.fail(fmt.Errorf("consuming from queue %q: %w", r.p.Queue, err))
		r.exhausted = true
		return nil, false
	}
	return &consumer{r: r, tag: tag, deliveries: deliveries, movedBefore: r.res.Moved}, true
}

// run takes the consumer's deliveries until the broker ends them (after a
// cancel) or the channel closes. An interrupt only marks the pass: what
// it holds is still settled in order.
func (c *consumer) run(ctx context.Context) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	c.lastDelivery = time.Now()
	interrupt := ctx.Done()
	for {
		select {
		case d, ok := <-c.deliveries:
			if !ok {
				return
			}
			c.take(&d)
		case <-tick.C:
			c.idle()
		case <-interrupt:
			interrupt = nil
			c.r.ctxDone = true
		case e, ok := <-c.r.closed:
			c.r.channelGone(e, ok)
			return
		}
	}
}

// unacked is how many unacknowledged deliveries the broker counts against
// this consumer's window: those it sent, less the moves acked since.
func (c *consumer) unacked() int { return c.delivered - (c.r.res.Moved - c.movedBefore) }

// take examines one delivery, or holds it untouched when the pass is past
// its end or stopping.
func (c *consumer) take(d *amqp.Delivery) {
	r := c.r
	c.lastDelivery = time.Now()
	if c.delivered == 0 {
		r.generations = append(r.generations, d.DeliveryTag)
	}
	c.delivered++
	r.seen = append(r.seen, d.DeliveryTag)
	if r.takesNoMore() || r.stopping() {
		r.held = append(r.held, d.DeliveryTag)
		r.res.Unexamined++
	} else {
		r.examine(d)
	}
	if c.unacked() >= r.p.Window {
		r.flush()
	}
	if c.unacked() >= r.p.Window {
		// A full window of held messages: nothing more can come to this
		// consumer, so it can go. If the pass goes on, a fresh consumer
		// gets a fresh window.
		c.cancel()
	}
}

// idle runs on every tick. Once nothing came for a while it settles the
// moves in flight, and once the quiet lasts (or the pass takes no more) it
// asks the queue whether it has more, and ends the pass if not.
func (c *consumer) idle() {
	r := c.r
	quiet := time.Since(c.lastDelivery)
	if c.cancelled || quiet < 250*time.Millisecond {
		return
	}
	r.flush()
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

// cancel cancels the consumer once; the broker then closes its deliveries.
func (c *consumer) cancel() {
	if c.cancelled || c.r.dead {
		return
	}
	c.cancelled = true
	if err := c.r.ch.Cancel(c.tag, false); err != nil {
		c.r.fail(fmt.Errorf("cancelling the consumer: %w", err))
		c.r.exhausted = true
	}
}

// examine decides one delivery and starts its move; it reports whether the
// delivery is now in flight or acked (false: held for requeue).
func (r *passRun) examine(d *amqp.Delivery) bool {
	r.res.Scanned++
	dec := r.p.Decide(r.res.Scanned, d)
	if r.p.Target == "" || !dec.Move {
		r.held = append(r.held, d.DeliveryTag)
		r.res.Left++
		if dec.Note != "" {
			if r.res.LeftBy == nil {
				r.res.LeftBy = map[string]int{}
			}
			r.res.LeftBy[dec.Note]++
		}
		r.progress()
		return false
	}
	dc, err := r.ch.PublishWithDeferredConfirmWithContext(context.Background(), "", r.p.Target, true, false, r.p.Rewrite(d))
	if err != nil {
		r.held = append(r.held, d.DeliveryTag)
		r.res.Failed++
		r.fail(fmt.Errorf("publishing to queue %q: %w", r.p.Target, err))
		r.progress()
		return false
	}
	r.pending = append(r.pending, pendingMove{tag: d.DeliveryTag, dc: dc})
	if len(r.pending) >= r.batch {
		r.flush()
	}
	if r.p.MaxMoves > 0 && r.res.Moved+len(r.pending) >= r.p.MaxMoves && r.res.Stopped == "" {
		r.res.Stopped = fmt.Sprintf("moved the limit of %d messages", r.p.MaxMoves)
	}
	r.progress()
	return true
}

func (r *passRun) progress() {
	if r.p.Progress != nil {
		r.p.Progress(r.res)
	}
}

// flush waits for the confirms of the moves in flight, then acks the
// confirmed sources. If any copy of the batch came back unroutable, no
// source of the batch is acked: returns do not say which publish they
// answer, and a duplicate is better than a loss.
//
// An interrupt does not cut the wait short: the copies are already on their
// way, and acking their sources now saves duplicates. SettleTimeout bounds it.
func (r *passRun) flush() {
	if len(r.pending) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.p.SettleTimeout)
	defer cancel()
	confirmed := make([]bool, len(r.pending))
	for i, pm := range r.pending {
		ok, err := pm.dc.WaitContext(ctx)
		if err != nil {
			break // timed out: the rest stay unconfirmed, and in the source
		}
		confirmed[i] = ok
	}
	returned := 0
drain:
	for {
		select {
		case <-r.returns:
			returned++
		default:
			break drain
		}
	}
	nacked := 0
	for i, pm := range r.pending {
		if returned == 0 && confirmed[i] && !r.dead {
			if err := r.ch.Ack(pm.tag, false); err != nil {
				// The source stays unacked: the copy becomes a duplicate.
				r.held = append(r.held, pm.tag)
				r.res.Failed++
				r.fail(fmt.Errorf("acking a moved message in queue %q: %w", r.p.Queue, err))
				continue
			}
			r.res.Moved++
			continue
		}
		if !confirmed[i] {
			nacked++
		}
		r.held = append(r.held, pm.tag)
		r.res.Failed++
	}
	r.pending = r.pending[:0]
	switch {
	case returned > 0:
		r.fail(fmt.Errorf("queue %q returned %d moved messages as unroutable (does it still exist?); they stay in queue %q", r.p.Target, returned, r.p.Queue))
	case nacked > 0 && !r.dead:
		r.fail(fmt.Errorf("the broker did not confirm %d moves to queue %q; they stay in queue %q", nacked, r.p.Target, r.p.Queue))
	}
}

func (r *passRun) fail(err error) {
	if r.fatal == nil {
		r.fatal = err
	}
}

func (r *passRun) channelGone(e *amqp.Error, ok bool) {
	r.dead = true
	if ok && e != nil {
		r.fail(fmt.Errorf("the broker closed the channel: %w; every unacknowledged message went back to queue %q", e, r.p.Queue))
	} else {
		r.fail(fmt.Errorf("the channel closed; every unacknowledged message went back to queue %q", r.p.Queue))
	}
}

// finish settles the pass: the moves in flight are confirmed and acked,
// held messages are requeued in delivery order, and the channel is closed
// only once the broker has settled all of it.
func (r *passRun) finish(ctx context.Context) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.p.SettleTimeout)
	defer cancel()
	if !r.dead {
		r.flush()
	}
	select {
	case e, ok := <-r.closed:
		r.channelGone(e, ok)
	default:
	}
	if r.dead {
		r.res.Warnings = append(r.res.Warnings, "the channel closed before the end of the pass: the broker requeued the messages it held, possibly out of order")
		return
	}
	readyBefore, _, err := r.peekQueue()
	if err != nil {
		r.fail(err)
	}
	// A delivery the client dropped (see scan) left a gap in the delivery
	// tags, which the channel numbers 1, 2, 3...: requeue it by its tag.
	slices.Sort(r.seen)
	var next uint64 = 1
	for _, tag := range r.seen {
		for ; next < tag; next++ {
			r.held = append(r.held, next)
			r.res.Unexamined++
			r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("delivery %d of the pass never reached it; it was requeued unexamined", next))
		}
		next = tag + 1
	}
	// Delivery tags grow with delivery order, which is queue order. A
	// quorum queue applies the requeues of one consumer in order, but not
	// those of several: each consumer's are requeued, and applied, before
	// the next one's.
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
				r.ch.Close()
				return
			}
		}
		if wait && end > requeued && end < len(r.held) {
			wait = r.awaitSettled(fctx, readyBefore+end, false)
		}
		requeued = end
	}
	if wait {
		// Acks settle like requeues: wait for those too.
		r.awaitSettled(fctx, readyBefore+len(r.held), true)
	}
	r.ch.Close()
}

// awaitSettled polls the queue until the broker has applied every ack and
// requeue of the pass. A quorum queue settles them asynchronously and
// keeps counting a cancelled consumer until all its messages are settled,
// so both the ready count and the consumer count tell.
//
// With last false it only waits for wantReady ready messages.
func (r *passRun) awaitSettled(ctx context.Context, wantReady int, last bool) bool {
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
func (r *passRun) peekQueue() (ready, consumers int, err error) {
	ch, err := r.conn.Channel()
	if err != nil {
		return 0, 0, fmt.Errorf("opening a channel: %w", err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(r.p.Queue, false, false, false, false, nil)
	if err != nil {
		return 0, 0, queueError(r.p.Queue, err)
	}
	return q.Messages, q.Consumers, nil
}

// queueError turns a failed queue operation into a one-line error.
func queueError(queue string, err error) error {
	var ae *amqp.Error
	if errors.As(err, &ae) {
		switch ae.Code {
		case amqp.NotFound:
			return &QueueNotFoundError{Queue: queue}
		case amqp.AccessRefused:
			return fmt.Errorf("access to queue %q refused: %s", queue, ae.Reason)
		}
	}
	return fmt.Errorf("queue %q: %w", queue, err)
}

// Copy returns a persistent copy of a delivery's message (see
// broker.CopyMessage, which migrations use too).
func Copy(d *amqp.Delivery) amqp.Publishing { return broker.CopyMessage(d) }
