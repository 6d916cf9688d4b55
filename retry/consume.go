package retry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
)

// DefaultPrefetch is Consume's prefetch unless WithPrefetch says otherwise.
const DefaultPrefetch = 10

// MaxPrefetch is the largest prefetch: AMQP's prefetch-count is 16 bits.
const MaxPrefetch = 65535

// CheckPrefetch returns an error unless n is a prefetch Consume accepts,
// 1 to MaxPrefetch. (0, which AMQP reads as no limit, would mean as many
// handlers as deliveries.) It is the one rule, for Consume and for
// services that read the prefetch from their configuration.
func CheckPrefetch(n int) error {
	if n < 1 || n > MaxPrefetch {
		return fmt.Errorf("prefetch %d: must be from 1 to %d", n, MaxPrefetch)
	}
	return nil
}

// Dialer opens a new connection to the broker, for Consume's first start
// and every reconnection.
type Dialer func(ctx context.Context) (*amqp.Connection, error)

// DialURL returns a Dialer that dials url with config (name the
// connection in config.Properties to find it in the management UI).
func DialURL(url string, config amqp.Config) Dialer {
	return func(ctx context.Context) (*amqp.Connection, error) { return dialWithLogin(ctx, url, config) }
}

// Consume consumes queue with h until ctx is cancelled, and returns nil
// then. It runs the whole loop a service needs: it dials, checks the
// topology (New), sets the prefetch (WithPrefetch), runs that many
// handlers in parallel, each settling its delivery through a Retrier (a
// failed delivery's retry or dead-letter copy is confirmed and acked in
// the background while its handler takes the next delivery), and
// when the connection or the consumer is lost it reconnects with backoff
// (WithReconnectBackoff) and resumes. It declares nothing.
//
// When the queue has a return queue (contract.ReturnQueue, `return_queue:
// true` in the spec), Consume consumes it too, with a deeper prefetch
// (returnPrefetch), and its handlers take a delivery from it whenever one
// is waiting: delayed retries then reach a handler when their delay is
// over, not after the work queue's backlog.
//
// Only bad arguments (see CheckPrefetch), and at the first start a
// missing topology (a service pointed at a queue that `rmqtopo apply`
// never provisioned) or options that do not fit the queue's layout (see
// New), are returned as errors; afterwards, and for every connection
// error, Consume logs and retries.
//
// When ctx is cancelled, Consume cancels its consumer, requeues deliveries
// that were prefetched but not started, cancels the handlers' context
// after the grace period (WithShutdownGrace), waits for every handler to
// settle, and closes its connection.
//
// Deliveries that may be seen twice: any delivery unacked when a
// connection is lost is delivered again (Redelivered set), including one
// whose retry or dead-letter copy the broker had already confirmed, which
// then exists twice. Handlers must be idempotent.
func Consume(ctx context.Context, dial Dialer, queue string, h Handler, opts ...ConsumeOption) error {
	if dial == nil || queue == "" || h == nil {
		return errors.New("retry: Consume needs a dialer, a queue and a handler")
	}
	c := &consumer{queue: queue, h: h, o: newConsumeOptions(opts)}
	if err := CheckPrefetch(c.o.prefetch); err != nil {
		return fmt.Errorf("retry: %w", err)
	}
	c.log = c.o.log.With("queue", queue)
	return c.loop(ctx, dial)
}

type consumer struct {
	queue string
	h     Handler
	o     consumeOptions
	log   *slog.Logger
}

// loop runs sessions until ctx is cancelled.
func (c *consumer) loop(ctx context.Context, dial Dialer) error {
	wait := c.o.backoffMin
	for started := false; ; {
		consumed, err := c.session(ctx, dial, started)
		if ctx.Err() != nil {
			return nil
		}
		if !started && !consumed && fatalAtStart(err) {
			return err
		}
		started = started || consumed
		if consumed {
			wait = c.o.backoffMin
		}
		d := jitter(wait)
		c.log.Warn("retry: consumer lost; reconnecting", "in", d.Round(time.Millisecond), "error", err)
		if !sleep(ctx, d) {
			return nil
		}
		wait = min(2*wait, c.o.backoffMax)
	}
}

// session is one connection's life: it reports whether it got as far as
// consuming, and why it ended. reconnect says an earlier session consumed.
func (c *consumer) session(ctx context.Context, dial Dialer, reconnect bool) (consumed bool, err error) {
	dctx, l := withLoginSink(ctx)
	conn, err := dial(dctx)
	if err != nil {
		return false, fmt.Errorf("retry: connecting: %w", err)
	}
	defer conn.Close()
	lost := conn.NotifyClose(make(chan *amqp.Error, 1))
	r, err := newRetrier(conn, l, c.queue, c.o.options)
	if err != nil {
		return false, err
	}
	defer r.Close()
	subscribe := c.subscribe
	if n, ok := r.native(); ok && n.schedule.Route == contract.RouteModified {
		subscribe = c.subscribe10
	}
	deliveries, closeFeed, err := subscribe(conn, r)
	if err != nil {
		return false, err
	}
	defer closeFeed()
	_, native := r.native()
	c.log.Info("retry: consuming", "prefetch", c.o.prefetch, "return_queue", r.returnQueue(), "native", native)
	c.o.obs.Connected(c.queue, reconnect)
	sctx, restart := context.WithCancelCause(ctx)
	defer restart(nil)
	go c.watchSchedule(sctx, conn, r, restart)
	err = c.serve(sctx, deliveries, r, lost)
	if cause := context.Cause(sctx); err == nil && ctx.Err() == nil && errors.Is(cause, errRouteChanged) {
		return true, cause
	}
	return true, err
}

// consumerTag names Consume's consumer on its channel.
const consumerTag = "rmqtopo-retry"

// subscribe consumes the work queue, and its return queue if it has one,
// on one channel, each consumer with its own prefetch (global=false
// applies to the consumers started after it). It returns the feed and
// what closes it.
func (c *consumer) subscribe(conn *amqp.Connection, r *Retrier) (feed, func(), error) {
	ch, err := conn.Channel()
	if err != nil {
		return feed{}, nil, fmt.Errorf("retry: opening the consumer channel: %w", err)
	}
	fail := func(err error) (feed, func(), error) { ch.Close(); return feed{}, nil, err }
	ret, err := c.consumeReturn(ch, r)
	if err != nil {
		return fail(err)
	}
	if err := ch.Qos(c.o.prefetch, 0, false); err != nil {
		return fail(fmt.Errorf("retry: setting the prefetch: %w", err))
	}
	deliveries, err := ch.Consume(c.queue, consumerTag, false, false, false, false, nil)
	if err != nil {
		return fail(fmt.Errorf("retry: consuming %q: %w", c.queue, err))
	}
	stop := func() {
		if err := ch.Cancel(consumerTag, false); err != nil {
			c.log.Warn("retry: cancelling the consumer", "error", err)
		}
		if ret != nil {
			if err := ch.Cancel(returnTag, false); err != nil {
				c.log.Warn("retry: cancelling the return queue's consumer", "error", err)
			}
		}
	}
	return feed{ret: ret, work: deliveries, stop: stop}, func() { ch.Close() }, nil
}

// serve runs the handlers on deliveries until the consumer ends (an error)
// or ctx is cancelled (nil, once every handler settled).
func (c *consumer) serve(ctx context.Context, deliveries feed, r *Retrier, lost <-chan *amqp.Error) error {
	hctx, graceThenCancel, cancel := c.handlerContext(ctx)
	defer cancel()
	var stopping atomic.Bool
	var wg sync.WaitGroup
	for range c.o.prefetch {
		wg.Go(func() {
			f := deliveries
			for d, ok := f.next(); ok; d, ok = f.next() {
				if stopping.Load() {
					r.giveBack(d) // prefetched, never started
					continue
				}
				c.process(hctx, r, d, &wg)
			}
		})
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()

	select {
	case <-finished:
		return c.lostReason(lost)
	case <-ctx.Done():
		stopping.Store(true)
		c.log.Info("retry: stopping: cancelling the consumer and settling in-flight deliveries", "grace", c.o.grace)
		deliveries.stop()
		// Only now: a handler cancelled before the consumer was requeues
		// its delivery to a consumer that may take it again.
		graceThenCancel()
		<-finished
		return nil
	}
}

// process runs the handler on d and settles d. A failed delivery's
// settling (publishing its retry or dead-letter copy, waiting for the
// broker's confirmation, then acking) goes on in a goroutine of its own,
// counted in wg, so that the handler takes its next delivery at once: a
// confirmation can take hundreds of milliseconds when the broker syncs
// its log, and with one handler every retry due meanwhile waited behind it
// (docs/benchmarks.md, "Retries behind a backlog"). How many settle at
// once is bounded by the deliveries the broker lets the consumer hold
// unacknowledged (its prefetches); each is acked only after its copy was
// confirmed, as before.
func (c *consumer) process(ctx context.Context, r *Retrier, d amqp.Delivery, wg *sync.WaitGroup) {
	start := time.Now()
	hctx, tr := r.begin(ctx, &d)
	err := r.run(hctx, c.h, d)
	took := time.Since(start)
	if err == nil || cancelled(ctx, err) {
		_, _ = r.settle(ctx, d, err, took, tr)
		return
	}
	// The caller's own count keeps wg above zero until this Add.
	wg.Go(func() { _, _ = r.settle(ctx, d, err, took, tr) })
}

// handlerContext is the handlers' context: it keeps ctx's values, and
// graceThenCancel cancels it after the grace period (serve calls it once
// its consumer is cancelled); cancel cancels it at once.
func (c *consumer) handlerContext(ctx context.Context) (hctx context.Context, graceThenCancel, cancel context.CancelFunc) {
	hctx, cancel = context.WithCancel(context.WithoutCancel(ctx))
	graceThenCancel = func() {
		if c.o.grace <= 0 {
			cancel()
			return
		}
		t := time.AfterFunc(c.o.grace, cancel)
		context.AfterFunc(hctx, func() { t.Stop() })
	}
	return hctx, graceThenCancel, cancel
}

// lostReason says why the deliveries stopped while ctx was live.
func (c *consumer) lostReason(lost <-chan *amqp.Error) error {
	select {
	case e := <-lost:
		return fmt.Errorf("retry: connection lost: %v", e)
	case <-time.After(100 * time.Millisecond):
		return errors.New("retry: the broker ended the consumer (queue deleted, or channel closed)")
	}
}

// jitter returns d give or take a fifth, so that many consumers losing one
// broker do not come back in step.
func jitter(d time.Duration) time.Duration {
	f := 0.8 + 0.4*rand.Float64()
	return time.Duration(float64(d) * f)
}

// sleep waits d or until ctx is done; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
