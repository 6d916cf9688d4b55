package retryotel

import (
	"context"
	"encoding/hex"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
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
		l := &linked{link: [1]trace.Link{{SpanContext: prev, Attributes: linkAttrs}}}
		opts = append(append(l.opts[:0], opts...), trace.WithLinks(l.link[:]...))
	}
	ctx, span := t.tracer.Start(ctx, p.spanName, opts...)
	if !span.IsRecording() {
		return ctx, &deliveryTrace{t: t, span: span, carried: carried}
	}
	rt := &recordingTrace{deliveryTrace: deliveryTrace{t: t, span: span, carried: carried}}
	rt.n = len(rt.deliveryAttributes(attempt, d))
	return ctx, rt
}

// linked holds the link to a delivery's previous attempt and the options
// that start its span with it, in one allocation.
type linked struct {
	link [1]trace.Link
	opts [4]trace.SpanStartOption
}

// linkAttrs are the attributes of a link to the previous attempt: shared,
// never written.
var linkAttrs = []attribute.KeyValue{attrLink.String("previous-attempt")}

// deliveryTrace is one attempt's span.
type deliveryTrace struct {
	t    *Telemetry
	span trace.Span
	// carried: the delivery came with a context (the span's parent).
	carried bool
}

// recordingTrace is one attempt's span that records. Its attributes are
// built in attrs, made with the trace, rather than in slices of their own:
// the delivery's at Start (attrs[:n], 6 at most), the settlement's after
// them at End, which sets them all at once. Each SetAttributes grows the
// span's own slice (the SDK's), so that one call rather than two saves a
// copy; nothing reads a span's attributes before it ends but a span
// processor's OnStart, which runs inside Start and so never saw the
// delivery's anyway.
type recordingTrace struct {
	deliveryTrace
	n     int
	attrs [10]attribute.KeyValue
}

func (rt *recordingTrace) deliveryAttributes(attempt int, d *amqp.Delivery) []attribute.KeyValue {
	attrs := append(rt.attrs[:0:6], attrAttempt.Int(attempt), attrExchange.String(d.Exchange))
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

// End implements retry.DeliveryTrace: a span that does not record has
// nothing to be told.
func (dt *deliveryTrace) End(retry.Settlement, error) { dt.span.End() }

// End implements retry.DeliveryTrace: the outcome, and the error if the
// handler or the settling failed. A handler cancelled by a shutdown, its
// delivery requeued unchanged, did not fail.
func (rt *recordingTrace) End(s retry.Settlement, herr error) {
	span := rt.span
	if s.Outcome == retry.Requeued && s.Err == nil {
		herr = nil
	}
	attrs := endAttributes(rt.attrs[:rt.n], s)
	if herr != nil {
		attrs = append(attrs, semconv.ErrorTypeKey.String(fmt.Sprintf("%T", herr)))
	} else if s.Err != nil {
		attrs = append(attrs, semconv.ErrorTypeKey.String(fmt.Sprintf("%T", s.Err)))
	}
	span.SetAttributes(attrs...)
	for _, err := range [...]error{herr, s.Err} {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

// endAttributes appends the settlement's attributes to attrs.
func endAttributes(attrs []attribute.KeyValue, s retry.Settlement) []attribute.KeyValue {
	attrs = append(attrs, attrOutcome.String(outcomeName(s.Outcome)))
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
	tid, sid, flags := sc.TraceID(), sc.SpanID(), sc.TraceFlags()
	var b [55]byte
	copy(b[:], "00-")
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:], []byte{byte(flags)})
	return string(b[:])
}

// previousAttempt reads HeaderPreviousAttempt, a traceparent of version
// 00 as traceparent writes it (read as propagation.TraceContext would,
// without its context and carrier); invalid if absent or malformed.
func previousAttempt(h amqp.Table) trace.SpanContext {
	v := headerCarrier(h).Get(HeaderPreviousAttempt)
	if len(v) != 55 || v[:3] != "00-" || v[35] != '-' || v[52] != '-' {
		return trace.SpanContext{}
	}
	tid, err1 := trace.TraceIDFromHex(v[3:35])
	sid, err2 := trace.SpanIDFromHex(v[36:52])
	var flags [1]byte
	_, err3 := hex.Decode(flags[:], []byte(v[53:]))
	if err1 != nil || err2 != nil || err3 != nil || flags[0] > 3 {
		return trace.SpanContext{}
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid,
		TraceFlags: trace.TraceFlags(flags[0]), Remote: true})
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
