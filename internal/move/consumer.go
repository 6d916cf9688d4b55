package move

import (
	"context"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

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
	tick := time.NewTicker(r.mode.idleAfter())
	defer tick.Stop()
	c.lastDelivery = time.Now()
	interrupt := ctx.Done()
	var confirms <-chan amqp.Confirmation
	if r.conf != nil {
		confirms = r.conf.confirms
	}
	for !(r.mode.stopsAtOnce() && r.halted()) {
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
// the next consumer takes over, unless the mode ends the pass.
func (c *consumer) ended(ctx context.Context) { c.r.mode.ended(ctx, c) }

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

// idle runs on every tick. Once nothing came for a while it settles the
// moves in flight, and once the quiet lasts the mode decides whether the
// pass is done.
func (c *consumer) idle() {
	r := c.r
	if c.cancelled || c.quiet() < r.mode.idleAfter() {
		return
	}
	r.flush()
	quiet := c.quiet()
	if quiet < r.mode.idleAfter() {
		return // the flush acknowledged moves: the broker may send more
	}
	r.mode.quiet(c, quiet)
}

// drain starts the check that a move until empty is drained, once the
// queue has no ready message: deliveries the broker sent the consumer and
// the pass has not received yet do not count as ready, and quiet is no
// proof that none is on its way. It cancels the consumer; the run goes on
// taking its deliveries until they end, and checkDrained then asks the
// queue again.
//
// It relies on two promises. amqp091-go's Cancel (noWait false) returns
// once basic.cancel-ok came, and the consumer's delivery channel yields
// every delivery that came before it, then closes. RabbitMQ (3.10 as 4.x)
// sends no delivery after cancel-ok: a quorum queue returns to the queue
// the deliveries still on their way instead (rabbitmq-server#3729; see
// settledReady), and a cancel requeues none of those the consumer holds
// (TestCancelKeepsDeliveries).
func (c *consumer) drain(others int) {
	c.draining, c.others = true, others
	c.cancel()
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
