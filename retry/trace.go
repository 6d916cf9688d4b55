package retry

import (
	"context"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Tracer follows each delivery that Consume or a Handle function runs a
// handler on, from before its handler runs until it is settled: package
// retry/retryotel implements it with OpenTelemetry spans. It is an
// interface here so that package retry imports no tracing library, and a
// service that does not trace links none. Its methods are called from the
// handlers' goroutines: they must be safe for concurrent use.
//
// Deliveries settled by Settle, Retry, Reject or Ack directly (a service
// running its own handler) and deliveries Consume gives back unstarted at
// shutdown are not traced: no handler of the helper's ran them.
type Tracer interface {
	// Start is called before the handler runs on d, whose attempt number
	// is attempt (0 when its attempt header is malformed). The handler
	// runs with the context returned, which must be ctx or derived from
	// it. The DeliveryTrace returned is told of d's copies and settlement;
	// Start must not change d.
	Start(ctx context.Context, queue string, attempt int, d *amqp.Delivery) (context.Context, DeliveryTrace)
}

// DeliveryTrace is the trace of one delivery, from Tracer.Start.
type DeliveryTrace interface {
	// Publishing is called with the headers of each copy of the delivery
	// that the helper is about to publish (a retry copy, or a dead letter),
	// so that the copy carries the trace on. The table is the copy's own:
	// Publishing may add headers, but must leave the contract's (rmqtopo-
	// attempt and the like) as they are.
	Publishing(headers amqp.Table)
	// End is called once the delivery is settled as s says; herr is the
	// handler's error, nil if it succeeded.
	End(s Settlement, herr error)
}

// WithTracer sets the Tracer told of every delivery a handler runs on
// (see Tracer). Given several times, the last one is used.
func WithTracer(t Tracer) Option {
	return func(o *options) { o.tracer = t }
}

// Options returns one Option made of opts, applied in order: for a package
// that configures the helper in several ways with a single option, as
// retry/retryotel does (an Observer and a Tracer).
func Options(opts ...Option) Option {
	return func(o *options) {
		for _, opt := range opts {
			if opt != nil {
				opt(o)
			}
		}
	}
}

// begin starts d's trace when a Tracer is set: it returns the handler's
// context and the trace, nil without a Tracer.
func (r *Retrier) begin(ctx context.Context, d *amqp.Delivery) (context.Context, DeliveryTrace) {
	if r.tracer == nil {
		return ctx, nil
	}
	attempt, _ := r.route.attemptOf(d)
	return r.tracer.Start(ctx, r.route.queueName(), attempt, d)
}

// publishing lets tr carry its trace into a copy's headers.
func publishing(tr DeliveryTrace, msg *amqp.Publishing) {
	if tr != nil {
		tr.Publishing(msg.Headers)
	}
}
