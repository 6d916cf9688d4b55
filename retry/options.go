package retry

import (
	"log/slog"
	"sync/atomic"
	"time"
)

// Option configures a Retrier (New). Consume takes every Option too, for
// the Retrier it makes on each connection.
type Option func(*options)

// ConsumeOption configures Consume: an Option, or one of Consume's own
// (WithPrefetch, WithShutdownGrace, WithReconnectBackoff), which New does
// not take: giving one to New does not compile, rather than being
// dropped.
type ConsumeOption interface{ applyConsume(*consumeOptions) }

func (o Option) applyConsume(c *consumeOptions) {
	if o != nil {
		o(&c.options)
	}
}

// consumeOnly is an option only Consume takes.
type consumeOnly func(*consumeOptions)

func (o consumeOnly) applyConsume(c *consumeOptions) { o(c) }

// options is what an Option sets: a Retrier's configuration.
type options struct {
	log            *slog.Logger
	obs            multiObserver
	confirmTimeout time.Duration
	levels         *levels // WithLevels (delay.go)
	tracer         Tracer  // WithTracer (trace.go)
	// warned is not set by an Option: it is state that the Retriers made
	// from one options share (warnUnhonoured), so that a Consume warns
	// once however often it reconnects.
	warned *atomic.Bool
}

func newOptions(opts []Option) options {
	o := options{log: slog.Default(), confirmTimeout: 30 * time.Second, warned: new(atomic.Bool)}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// consumeOptions is Consume's configuration: its Retriers' and its own.
type consumeOptions struct {
	options
	prefetch               int
	grace                  time.Duration
	backoffMin, backoffMax time.Duration
	// refresh is how often a native queue's schedule is read again
	// (refresh.go).
	refresh time.Duration
}

func newConsumeOptions(opts []ConsumeOption) consumeOptions {
	c := consumeOptions{
		options:    newOptions(nil),
		prefetch:   DefaultPrefetch,
		backoffMin: 100 * time.Millisecond,
		backoffMax: 10 * time.Second,
		refresh:    DefaultScheduleRefresh,
	}
	for _, opt := range opts {
		if opt != nil {
			opt.applyConsume(&c)
		}
	}
	return c
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

// WithObserver adds an observer of settlements, copies and confirmations
// (see Observer). Given several times, every observer is told, in order.
func WithObserver(obs Observer) Option {
	return func(o *options) {
		if obs != nil {
			o.obs = append(o.obs, obs)
		}
	}
}

// WithConfirmTimeout bounds the wait for the broker's confirmation of a
// copy, publishing it again after nacks included (default 30s). On timeout
// the original is nacked with requeue.
func WithConfirmTimeout(d time.Duration) Option { return func(o *options) { o.confirmTimeout = d } }

// WithPrefetch sets Consume's consumer prefetch, which is also the number
// of handlers it runs in parallel: each unacked delivery has a handler
// (default DefaultPrefetch). CheckPrefetch says which values Consume takes.
func WithPrefetch(n int) ConsumeOption {
	return consumeOnly(func(c *consumeOptions) { c.prefetch = n })
}

// WithShutdownGrace sets how long Consume lets running handlers go on
// after its context is cancelled before it cancels their context too
// (default 0: at once). A handler that then returns its context's error
// has its delivery requeued unchanged.
func WithShutdownGrace(d time.Duration) ConsumeOption {
	return consumeOnly(func(c *consumeOptions) { c.grace = max(d, 0) })
}

// WithReconnectBackoff sets Consume's wait before reconnecting: it starts
// at lo and doubles up to hi after each failed attempt, with jitter
// (default 100ms to 10s).
func WithReconnectBackoff(lo, hi time.Duration) ConsumeOption {
	return consumeOnly(func(c *consumeOptions) {
		c.backoffMin, c.backoffMax = max(lo, time.Millisecond), max(hi, lo)
	})
}
