package move

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/opsdata"
)

// Decision is what a pass does with one message.
type Decision struct {
	Move bool
	// Note says why a message is left in place; Result.LeftBy counts the
	// notes.
	Note string
}

// Pass is one scan of a queue that moves some messages to a target queue
// and leaves every other message in place, in order; or, with UntilEmpty,
// one move of every message of a queue. ops.Pass documents the fields it
// shares.
type Pass struct {
	// Queue is scanned; Target receives moved messages, through the default
	// exchange. An empty Target makes a read-only pass (a peek).
	Queue, Target string
	// Scan bounds the messages examined; 0 means the queue's depth when the
	// pass starts.
	Scan int
	// MaxMoves stops the pass after that many moves; 0 means no limit.
	MaxMoves int
	// Window is the most deliveries held at once (the consumer prefetch),
	// and so the most publishes awaiting a confirm.
	Window int
	// InPlaceRequeue says the queue puts a requeued message back where it
	// was (classic queues); see ops.Pass.
	InPlaceRequeue bool
	// UntilEmpty moves every message, those that arrive during the move
	// too, until the queue is drained: it has no ready message and none is
	// on its way to the pass (a migration's move; see consumer.drain).
	// Scan and MaxMoves do not apply. A move that stops (a failed copy, an
	// interrupt) does not take the rest of the queue: closing the channel
	// gives every unacknowledged message back, and the pass does not wait
	// for the broker to settle its acks, since other consumers make the
	// queue's counts say nothing about them (a migration waits for the
	// queue itself before deleting it).
	UntilEmpty bool
	// Decide is called once per examined message, in queue order, with its
	// 1-based position; nil moves every message.
	Decide func(position int, d *amqp.Delivery) Decision
	// Rewrite builds the copy published to Target; nil copies the message
	// (see Copy).
	Rewrite func(d *amqp.Delivery) amqp.Publishing
	// Progress, if set, is called after each examined message; with
	// UntilEmpty, after each acknowledgement of moves instead.
	Progress func(Result)
	// SettleTimeout bounds each wait for outstanding confirms, and the wait
	// for the broker to settle acks and requeues at the end; 0 means 30s.
	SettleTimeout time.Duration
	// ConsumerTag names the pass's first consumer; later ones get "-1",
	// "-2"... appended. Empty means rmqtopo-pass-0, rmqtopo-pass-1...
	ConsumerTag string
	// QueueError turns a failed passive declare of Queue into the error
	// the pass returns; nil wraps it with the queue's name.
	QueueError func(queue string, err error) error
}

// DefaultWindow is the default number of deliveries a pass holds at once.
const DefaultWindow = 1000

// Result counts what a pass did: the dlq commands' own result
// (internal/opsdata documents it), so that ops hands it on as it is; the
// engine leaves ResetHeaders to its callers.
type Result = opsdata.Result

// How long a consumer goes without a delivery before a pass settles its
// moves and asks the queue for more. A scan waits longer: its end is
// known (its limit). A move until empty asks sooner, since the answer
// only tells it when to check that it is drained, which takes a round
// trip and proves it (see consumer.drain).
const (
	scanIdle  = 250 * time.Millisecond
	drainIdle = 50 * time.Millisecond
)

// run is the state of one Run.
type run struct {
	p    Pass
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

// Run runs the pass on a channel of its own over conn.
//
// Messages are consumed with manual acks and a prefetch of Window. A
// message to move is published to Target (persistent, mandatory, in
// confirm mode) and acked in the source only after the broker confirmed
// the copy; any other outcome keeps it unacked. Messages left in place are
// held unacked until the end of the pass, then requeued one by one in
// delivery order. When a consumer holds a full window of messages, it is
// cancelled (its deliveries stay held) and a new one takes the next
// window, so memory stays bounded by Window whatever the queue's depth.
// Before closing its channel, Run waits until the broker has settled every
// ack and requeue (not with UntilEmpty): closing earlier makes a quorum
// queue return unsettled messages out of order, and acked ones as
// duplicates.
func (p Pass) Run(ctx context.Context, conn *amqp.Connection) (Result, error) {
	p = p.withDefaults()
	r := &run{p: p, conn: conn, res: Result{Queue: p.Queue, Target: p.Target}}
	if p.Target != "" && p.Target == p.Queue {
		return r.res, fmt.Errorf("cannot move messages of queue %q to itself", p.Queue)
	}
	if err := r.open(); err != nil || r.limit == 0 {
		if r.ch != nil {
			r.ch.Close()
		}
		return r.res, err
	}
	r.scan(ctx)
	r.finish(ctx)
	if r.fatal == nil && r.ctxDone {
		r.fatal = fmt.Errorf("interrupted: %w", context.Cause(ctx))
	}
	return r.res, r.fatal
}

func (p Pass) withDefaults() Pass {
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
	if p.QueueError == nil {
		p.QueueError = func(queue string, err error) error { return fmt.Errorf("queue %q: %w", queue, err) }
	}
	return p
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
	r.limit = q.Messages
	switch {
	case r.limit == 0:
		return nil
	case p.UntilEmpty:
		r.limit = math.MaxInt
	case p.Scan > 0 && p.Scan < r.limit:
		r.limit = p.Scan
	}
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

// acked counts n more moves acknowledged; a move until empty reports its
// progress there, since its messages are all moves.
func (r *run) acked(n int) {
	r.res.Moved += n
	if r.p.UntilEmpty {
		r.progress()
	}
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
	return r.dead || r.exhausted || (r.stopping() && (r.p.InPlaceRequeue || r.p.UntilEmpty))
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

// consumer is one generation of a pass's consumers.
type consumer struct {
	r          *run
	tag        string
	deliveries <-chan amqp.Delivery
	// delivered counts the deliveries to this consumer, movedBefore the
	// pass's moves when it started.
	delivered, movedBefore int
	cancelled              bool
	// draining: a move until empty cancelled the consumer to check that
	// the queue is drained; others is how many other consumers the queue
	// had then.
	draining bool
	others   int
	// lastDelivery is when the pass was done with the consumer's last
	// delivery (examined it, and published its copy).
	lastDelivery time.Time
}

// consume starts the consumer of generation gen; on failure the pass is
// exhausted.
func (r *run) consume(gen int) (*consumer, bool) {
	tag := fmt.Sprintf("rmqtopo-pass-%d", gen)
	if r.p.ConsumerTag != "" {
		tag = r.p.ConsumerTag
		if gen > 0 {
			tag = fmt.Sprintf("%s-%d", tag, gen)
		}
	}
	deliveries, err := r.ch.Consume(r.p.Queue, tag, false, false, false, false, nil)
	if err != nil {
		r.fail(fmt.Errorf("consuming from queue %q: %w", r.p.Queue, err))
		r.exhausted = true
		return nil, false
	}
	return &consumer{r: r, tag: tag, deliveries: deliveries, movedBefore: r.res.Moved}, true
}

// run takes the consumer's deliveries and the moves' confirms until the
// broker ends the deliveries (after a cancel) or the channel closes; a
// move until empty ends as soon as it halts. An interrupt only marks the
// pass: what it holds is still settled in order.
func (c *consumer) run(ctx context.Context) {
	r := c.r
	tick := time.NewTicker(r.idleAfter())
	defer tick.Stop()
	c.lastDelivery = time.Now()
	interrupt := ctx.Done()
	var confirms <-chan amqp.Confirmation
	if r.conf != nil {
		confirms = r.conf.confirms
	}
	for !(r.p.UntilEmpty && r.halted()) {
		select {
		case d, ok := <-c.deliveries:
			if !ok {
				c.ended(ctx)
				return
			}
			c.take(&d)
		case cf, ok := <-confirms:
			if !ok {
				confirms = nil // the channel is going: closed says why
				continue
			}
			if err := r.conf.handle(cf); err != nil {
				r.fail(err)
			}
		case <-tick.C:
			c.idle()
		case <-interrupt:
			interrupt = nil
			r.ctxDone = true
		case e, ok := <-r.closed:
			r.channelGone(e, ok)
			return
		}
		c.relay() // a delivery or a failed move may have filled the window
	}
}

// ended handles the end of the deliveries: after a cancel of the pass's,
// the next consumer takes over, unless the cancel found a move until empty
// drained. The broker cancelled a move until empty itself (its queue was
// deleted): that is an error.
func (c *consumer) ended(ctx context.Context) {
	switch {
	case c.draining:
		c.r.checkDrained(ctx, c.others)
	case !c.cancelled && c.r.p.UntilEmpty:
		c.r.fail(fmt.Errorf("the broker cancelled the move from queue %q", c.r.p.Queue))
	}
}

func (r *run) idleAfter() time.Duration {
	if r.p.UntilEmpty {
		return drainIdle
	}
	return scanIdle
}

// unacked is how many unacknowledged deliveries the broker counts against
// this consumer's window: those it sent, less the moves acked since.
func (c *consumer) unacked() int { return c.delivered - (c.r.res.Moved - c.movedBefore) }

// take examines one delivery, or holds it untouched when the pass is past
// its end or stopping.
func (c *consumer) take(d *amqp.Delivery) {
	r := c.r
	defer func() { c.lastDelivery = time.Now() }()
	if c.delivered == 0 {
		r.generations = append(r.generations, d.DeliveryTag)
	}
	c.delivered++
	r.see(d.DeliveryTag)
	if r.takesNoMore() || r.stopping() {
		r.held = append(r.held, d.DeliveryTag)
		r.res.Unexamined++
	} else {
		r.examine(d)
	}
}

// relay cancels the consumer once it holds a full window of messages the
// pass leaves or failed to move: nothing more can come to it. Its moves
// are settled first, since the next consumer counts its window from its
// own. If the pass goes on, a fresh consumer gets a fresh window. Moves in
// flight do not count: their acks free the window, and waiting for them
// at every full window would stop the pipeline.
func (c *consumer) relay() {
	r := c.r
	if !c.cancelled && c.unacked()-r.outstanding() >= r.p.Window {
		r.flush()
		c.cancel()
	}
}

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

// idle runs on every tick. Once nothing came for a while it settles the
// moves in flight, and once the quiet lasts (or the pass takes no more) it
// asks the queue whether it has more, and ends the pass if not. A move
// until empty asks at once, and if the queue has no ready message it
// checks that it is drained: deliveries on their way do not count as
// ready.
func (c *consumer) idle() {
	r := c.r
	if c.cancelled || c.quiet() < r.idleAfter() {
		return
	}
	r.flush()
	quiet := c.quiet()
	if quiet < r.idleAfter() {
		return // the flush acknowledged moves: the broker may send more
	}
	if !r.p.UntilEmpty && !r.takesNoMore() && quiet < time.Second {
		return
	}
	ready, consumers, err := r.peekQueue()
	switch {
	case err != nil:
		r.fail(err)
	case ready == 0 && r.p.UntilEmpty:
		c.drain(max(consumers-1, 0)) // the others, besides this consumer
		return
	case ready == 0:
		if !r.p.UntilEmpty && !r.takesNoMore() && r.res.Stopped == "" {
			r.res.Stopped = fmt.Sprintf("the queue ran out of ready messages after %d of %d (consumed or expired elsewhere)", r.taken(), r.limit)
		}
	case quiet > time.Minute:
		r.res.Stopped = "no delivery for a minute although the queue has ready messages"
	default:
		return
	}
	r.exhausted = true
	if !r.p.UntilEmpty {
		c.cancel() // a move until empty just ends: its channel closes
	}
}

// drain starts the check that a move until empty is drained, once the
// queue has no ready message: deliveries the broker sent the consumer and
// the pass has not received yet do not count as ready, and quiet is no
// proof that none is on its way. It cancels the consumer; the run goes on
// taking its deliveries until they end, and checkDrained then asks the
// queue again.
//
// Channel.Cancel with noWait false returns once basic.cancel-ok came, and
// a channel's frames come in order: every basic.deliver the broker sent
// the consumer came before it. amqp091-go (v1.16.0) reads a connection's
// frames on one goroutine, which hands each delivery over to the
// consumer's buffer goroutine (consumers.send, an unbuffered send into an
// unbounded queue) before it reads the next frame; Cancel then closes the
// buffer's input (consumers.cancel), and the buffer goroutine passes on
// every delivery it holds before it closes the delivery channel
// (consumers.buffer). So the channel yields every delivery sent before
// cancel-ok, then closes. Meanwhile confirms never block the reader: their
// buffer holds a window and one more.
//
// RabbitMQ (3.10 as 4.x) sends no delivery to a consumer after its
// cancel-ok. A classic queue process sends cancel-ok to the channel
// process after the deliveries it sent it (rabbit_amqqueue_process,
// basic_cancel), and the channel writes both in that order. A quorum
// queue's channel forgets the consumer as it handles basic.cancel
// (rabbit_fifo_client:cancel_checkout) and returns to the queue, instead
// of sending them, the deliveries for it still in its mailbox
// (rabbit_fifo_client:handle_delivery, rabbitmq-server#3729): see
// settledReady for those. Nor does a cancel requeue the deliveries the
// consumer holds: they stay with the channel, to be acked; a quorum queue
// counts the consumer until they are settled (TestCancelKeepsDeliveries).
func (c *consumer) drain(others int) {
	c.draining, c.others = true, others
	c.cancel()
}

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
				"queue %q still had %d consumers %s after the move cancelled its own (%d others before): whether it was drained was judged on its ready messages alone",
				r.p.Queue, consumers, r.p.SettleTimeout, others))
			return ready, nil
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// quiet is how long the consumer has had room in its window and no
// delivery: since the pass was done with its last delivery or last
// acknowledged moves, whichever is later. Time the pass spends on its own
// work (Decide, Progress, waiting for confirms) is not quiet: the broker
// may have sent deliveries meanwhile that no longer count as ready, and a
// move until empty that asked the queue then would cancel its consumer
// for nothing (see consumer.drain).
func (c *consumer) quiet() time.Duration {
	since := c.lastDelivery
	if c.r.lastAck.After(since) {
		since = c.r.lastAck
	}
	return time.Since(since)
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
			r.res.Stopped = fmt.Sprintf("moved the limit of %d messages", r.p.MaxMoves)
		}
	}
	if !r.p.UntilEmpty {
		r.progress()
	}
}

func (r *run) progress() {
	if r.p.Progress != nil {
		r.p.Progress(r.res)
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
	if r.p.UntilEmpty {
		r.ch.Close()
		return
	}
	r.requeue(fctx)
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

// Copy returns a persistent copy of a delivery's message: same body,
// headers and properties. A user-id is dropped because the broker refuses
// a publish whose user-id is not the publishing user's, and so are the
// counts the broker set on the delivery (contract.DeliveryHeaders): they
// are the source queue's, not the message's.
func Copy(d *amqp.Delivery) amqp.Publishing {
	return amqp.Publishing{
		Headers:         withoutDeliveryHeaders(d.Headers),
		ContentType:     d.ContentType,
		ContentEncoding: d.ContentEncoding,
		DeliveryMode:    amqp.Persistent,
		Priority:        d.Priority,
		CorrelationId:   d.CorrelationId,
		ReplyTo:         d.ReplyTo,
		Expiration:      d.Expiration,
		MessageId:       d.MessageId,
		Timestamp:       d.Timestamp,
		Type:            d.Type,
		AppId:           d.AppId,
		Body:            d.Body,
	}
}

// withoutDeliveryHeaders returns h without contract.DeliveryHeaders, h
// itself when it has none.
func withoutDeliveryHeaders(h amqp.Table) amqp.Table {
	for name := range h {
		if contract.DeliveryHeaders(name) {
			out := maps.Clone(h)
			maps.DeleteFunc(out, func(name string, _ any) bool { return contract.DeliveryHeaders(name) })
			return out
		}
	}
	return h
}
