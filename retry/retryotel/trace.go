package retryotel

import (
	"context"
	"fmt"
	"slices"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/rmqtopo/rmqtopo/retry"
)

// rmqtopo's own attributes (see the package comment).
const (
	attrAttempt     = attribute.Key("rmqtopo.retry.attempt")
	attrOutcome     = attribute.Key("rmqtopo.retry.outcome")
	attrNextAttempt = attribute.Key("rmqtopo.retry.next_attempt")
	attrDelay       = attribute.Key("rmqtopo.retry.delay")
	attrReason      = attribute.Key("rmqtopo.retry.dead_letter_reason")
	attrExchange    = attribute.Key("rmqtopo.exchange")
	attrLink        = attribute.Key("rmqtopo.retry.link")
)

// Start implements retry.Tracer: it starts the attempt's span, a child
// of the context d carries, linked to the attempt before it.
func (t *Telemetry) Start(ctx context.Context, queue string, attempt int, d *amqp.Delivery) (context.Context, retry.DeliveryTrace) {
	// The span the consumer's own context may hold is not the message's:
	// forget it, so that a message without a context starts a trace of
	// its own. (Only when there is one: each context layer allocates.)
	if trace.SpanContextFromContext(ctx).IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, trace.SpanContext{})
	}
	ctx = t.prop.Extract(ctx, headerCarrier(d.Headers))
	carried := trace.SpanContextFromContext(ctx).IsValid()
	// What a sampler may look at is known per queue, and so are the span's
	// name and options: made once. The delivery's own attributes are built
	// only for a span that records.
	p := t.perQueue(queue)
	opts := p.spanOpts
	if prev := previousAttempt(d.Headers); prev.IsValid() {
		opts = append(slices.Clip(opts), trace.WithLinks(trace.Link{SpanContext: prev,
			Attributes: []attribute.KeyValue{attrLink.String("previous-attempt")}}))
	}
	ctx, span := t.tracer.Start(ctx, p.spanName, opts...)
	if span.IsRecording() {
		span.SetAttributes(deliveryAttributes(attempt, d)...)
	}
	return ctx, &deliveryTrace{t: t, span: span, carried: carried}
}

func deliveryAttributes(attempt int, d *amqp.Delivery) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs, attrAttempt.Int(attempt), attrExchange.String(d.Exchange))
	if d.RoutingKey != "" {
		attrs = append(attrs, semconv.MessagingRabbitMQDestinationRoutingKey(d.RoutingKey))
	}
	if d.DeliveryTag != 0 {
		attrs = append(attrs, semconv.MessagingRabbitMQMessageDeliveryTag(int(d.DeliveryTag)))
	}
	if d.MessageId != "" {
		attrs = append(attrs, semconv.MessagingMessageID(d.MessageId))
	}
	if d.CorrelationId != "" {
		attrs = append(attrs, semconv.MessagingMessageConversationID(d.CorrelationId))
	}
	return attrs
}

// deliveryTrace is one attempt's span.
type deliveryTrace struct {
	t    *Telemetry
	span trace.Span
	// carried: the delivery came with a context (the span's parent).
	carried bool
}

// Publishing implements retry.DeliveryTrace: the copy names this attempt's
// span for the next to link to, and, when the delivery carried no context,
// carries this span's as the message's.
func (dt *deliveryTrace) Publishing(h amqp.Table) {
	sc := dt.span.SpanContext()
	if !sc.IsValid() {
		return
	}
	h[HeaderPreviousAttempt] = traceparent(sc)
	if !dt.carried {
		dt.t.prop.Inject(trace.ContextWithSpanContext(context.Background(), sc), headerCarrier(h))
	}
}

// End implements retry.DeliveryTrace: the outcome, and the error if the
// handler or the settling failed.
func (dt *deliveryTrace) End(s retry.Settlement, herr error) {
	span := dt.span
	if span.IsRecording() {
		span.SetAttributes(endAttributes(s)...)
		switch {
		case s.Outcome == retry.Requeued && s.Err == nil:
			// The handler was cancelled by a shutdown: the delivery comes
			// back unchanged, nothing failed.
		case herr != nil:
			span.SetAttributes(semconv.ErrorTypeKey.String(fmt.Sprintf("%T", herr)))
			span.RecordError(herr)
			span.SetStatus(codes.Error, herr.Error())
		case s.Err != nil:
			span.SetAttributes(semconv.ErrorTypeKey.String(fmt.Sprintf("%T", s.Err)))
		}
		if s.Err != nil {
			span.RecordError(s.Err)
			span.SetStatus(codes.Error, s.Err.Error())
		}
	}
	span.End()
}

func endAttributes(s retry.Settlement) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attrOutcome.String(outcomeName(s.Outcome))}
	switch s.Outcome {
	case retry.Retried:
		attrs = append(attrs, attrNextAttempt.Int(s.Attempt+1))
		if s.DelayKnown {
			attrs = append(attrs, attrDelay.Float64(s.Delay.Seconds()))
		}
	case retry.DeadLettered:
		attrs = append(attrs, attrReason.String(s.Reason))
	}
	return attrs
}

// outcomeName is the past tense of what became of a delivery, the value
// of rmqtopo.retry.outcome.
func outcomeName(o retry.Outcome) string {
	switch o {
	case retry.Acked:
		return "acked"
	case retry.Retried:
		return "retried"
	case retry.DeadLettered:
		return "dead-lettered"
	case retry.Requeued:
		return "requeued"
	}
	return o.String()
}

// traceparent renders sc as a W3C traceparent header value.
func traceparent(sc trace.SpanContext) string {
	return fmt.Sprintf("00-%s-%s-%02x", sc.TraceID(), sc.SpanID(), byte(sc.TraceFlags()))
}

// previousAttempt reads HeaderPreviousAttempt; invalid if absent or
// malformed.
func previousAttempt(h amqp.Table) trace.SpanContext {
	v := headerCarrier(h).Get(HeaderPreviousAttempt)
	if v == "" {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": v})
	return trace.SpanContextFromContext(ctx)
}

// headerCarrier reads and writes a message's headers for a propagator.
type headerCarrier amqp.Table

// Get returns the header's text: a string, or bytes (how some clients
// send a long string), else "". A header key missing is read under x-key
// too: the name it has when the helper carried it as a message annotation
// of a native queue's retry (see retry.DeliveryTrace).
func (c headerCarrier) Get(key string) string {
	v, ok := c[key]
	if !ok {
		v = c["x-"+key]
	}
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	return ""
}

func (c headerCarrier) Set(key, value string) { c[key] = value }

func (c headerCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
