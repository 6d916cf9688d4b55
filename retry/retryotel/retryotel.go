// Package retryotel follows every delivery through retry.Consume (or a
// retry.Retrier's Handle) with OpenTelemetry: a consumer span for each
// attempt, all the attempts of one message in one trace, and the metrics
// package retry/retrymetrics gives Prometheus, through a meter. It lives
// apart from package retry so that a service that does not import it links
// no OpenTelemetry.
//
//	tel := retryotel.New() // the global providers; see the options
//	err := retry.Consume(ctx, dial, "orders", handle, tel.Option())
//
// # Spans
//
// Each attempt is a span of kind consumer named "process <queue>", whose
// parent is the context the message carries, read from its headers with the
// propagator (W3C trace context and baggage by default, WithPropagator). A
// message that carries none starts a trace of its own. The handler runs in
// the span's context, so its own spans are the attempt's children.
//
// The copies the helper publishes, retries and dead letters, carry the
// message's context on: the headers it came with, or, when it came with
// none, the context of its first attempt's span (injected with the
// propagator), so that its later attempts join that trace. They also carry
// the span of the attempt that made them in HeaderPreviousAttempt, and
// each attempt's span links to the attempt before it. `rmqtopo dlq replay`
// and `rmqtopo dlq move` keep both headers, so a replayed dead letter joins
// its trace again, linked to the attempt that dead-lettered it.
//
// Attributes, from the OpenTelemetry messaging conventions:
//
//	messaging.system                            rabbitmq
//	messaging.operation.type, .name             process
//	messaging.destination.name                  the work queue consumed
//	messaging.rabbitmq.destination.routing_key  the delivery's routing key
//	messaging.rabbitmq.message.delivery_tag     its delivery tag
//	messaging.message.id                        its message id, if any
//	messaging.message.conversation_id           its correlation id, if any
//	error.type                                  the handler's error's Go type, when it failed
//
// The conventions name the exchange as the destination; a retry arrives
// through the helper's own exchanges, so the queue is what stays the same
// from one attempt to the next (the exchange is rmqtopo.exchange). And
// rmqtopo's own:
//
//	rmqtopo.retry.attempt             the attempt number (1 for a first delivery)
//	rmqtopo.retry.outcome             acked, retried, dead-lettered or requeued
//	rmqtopo.retry.next_attempt        retried: the attempt the retry becomes
//	rmqtopo.retry.delay               retried: its delay in seconds, when the helper knows it (see retry.Settlement)
//	rmqtopo.retry.dead_letter_reason  dead-lettered: rejected, exhausted or malformed-attempt
//
// The messaging.system, operation, and destination attributes are given
// when the span starts, for a sampler to see; the others are set when it
// ends, at once (a handler that sets one of their keys on the span itself
// sees it replaced).
//
// A failed handler sets the span's status to Error and records its error;
// so does a settlement that failed (the copy was not confirmed). A handler
// cancelled by a shutdown, its delivery requeued unchanged, does not.
//
// On a queue of the native layout the broker itself returns a failed
// delivery to the queue. Over AMQP 1.0 (a schedule the broker cannot
// compute, or RetryAfter) the helper settles it with the modified outcome,
// whose x- annotations the broker keeps on the message: the trace travels
// there (x-rmqtopo-previous-attempt, and x-traceparent for a message that
// carried no context), so its attempts are in one trace, each linked to
// the one before. By basic.reject (linear delays over AMQP 0.9.1) nothing
// can be added: its attempts are in one trace only when the message
// carries a context, and are not linked.
//
// # Metrics
//
// The figures of retry/retrymetrics, through the meter provider's meter
// named ScopeName, each with the attribute messaging.destination.name (the
// queue):
//
//	rmqtopo.retry.deliveries        counter by rmqtopo.retry.outcome
//	rmqtopo.retry.dead_letters      counter by rmqtopo.retry.dead_letter_reason
//	rmqtopo.retry.settle_errors     counter by rmqtopo.retry.outcome: settlements that failed
//	rmqtopo.retry.retries           counter by rmqtopo.retry.attempt: retry copies confirmed, by the attempt they become
//	rmqtopo.retry.delivery.attempt  histogram of attempt numbers of settled deliveries
//	rmqtopo.retry.handler.duration  histogram, seconds, by rmqtopo.retry.attempt
//	rmqtopo.retry.confirms.pending  up-down counter: copies waiting for the broker's confirmation
//	rmqtopo.retry.reconnects        counter: connections retry.Consume made after losing one
//
// The counters are observable instruments: the helper adds to a number of
// its own, which the meter reads when it collects, so that a delivery pays
// an atomic add rather than an instrument's (the histograms are recorded
// per delivery: there is no observable histogram). A Telemetry's callbacks
// stay registered with the meter provider for its life.
package retryotel

import (
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/rmqtopo/rmqtopo/retry"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/rmqtopo/rmqtopo/retry/retryotel"

// HeaderPreviousAttempt is the header in which a copy the helper publishes
// carries the span of the attempt that made it, in W3C traceparent form,
// for the next attempt's span to link to.
const HeaderPreviousAttempt = "rmqtopo-previous-attempt"

// Option configures New.
type Option func(*config)

type config struct {
	tp   trace.TracerProvider
	mp   metric.MeterProvider
	prop propagation.TextMapPropagator
}

// WithTracerProvider sets the tracer provider (default
// otel.GetTracerProvider()).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithMeterProvider sets the meter provider (default
// otel.GetMeterProvider()).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithPropagator sets how a message's context is read from its headers
// and written into its copies' (default: W3C trace context and baggage;
// pass otel.GetTextMapPropagator() for the global one).
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(c *config) { c.prop = p }
}

// Telemetry is a retry.Tracer and a retry.Observer. One serves any number
// of queues and Consume calls.
type Telemetry struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	m      instruments
	queues sync.Map // queue name -> *perQueue
	last   atomic.Pointer[perQueue]
}

var (
	_ retry.Tracer   = (*Telemetry)(nil)
	_ retry.Observer = (*Telemetry)(nil)
)

// New returns the telemetry. An instrument the meter cannot create is
// reported to otel.Handle and left out: tracing does not depend on it.
func New(opts ...Option) *Telemetry {
	c := config{}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.prop == nil {
		c.prop = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	t := &Telemetry{tracer: c.tp.Tracer(ScopeName), prop: c.prop}
	t.newInstruments(c.mp.Meter(ScopeName))
	return t
}

// Option is the one option that gives t to retry.Consume or retry.New, as
// their Tracer and an Observer.
func (t *Telemetry) Option() retry.Option {
	return retry.Options(retry.WithTracer(t), retry.WithObserver(t))
}
