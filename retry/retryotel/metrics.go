package retryotel

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/rmqtopo/rmqtopo/retry"
)

// instruments are the metrics of the package comment.
type instruments struct {
	deliveries  metric.Int64Counter
	deadLetters metric.Int64Counter
	settleErrs  metric.Int64Counter
	retries     metric.Int64Counter
	attempts    metric.Int64Histogram
	handler     metric.Float64Histogram
	pending     metric.Int64UpDownCounter
	reconnects  metric.Int64Counter
}

func newInstruments(m metric.Meter) instruments {
	var i instruments
	// An instrument that fails is reported and replaced by a no-op one,
	// so that telemetry never stops a consumer.
	nop := noop.Meter{}
	check := func(err error) {
		if err != nil {
			otel.Handle(err)
		}
	}
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		if check(err); err != nil {
			c, _ = nop.Int64Counter(name)
		}
		return c
	}
	i.deliveries = counter("rmqtopo.retry.deliveries", "{delivery}", "Deliveries settled, by outcome.")
	i.deadLetters = counter("rmqtopo.retry.dead_letters", "{message}", "Messages the helper sent to the DLQ, by reason.")
	i.settleErrs = counter("rmqtopo.retry.settle_errors", "{delivery}", "Settlements that failed (copy not confirmed, or ack failed), by outcome.")
	i.retries = counter("rmqtopo.retry.retries", "{message}", "Retry copies confirmed, by the attempt they become.")
	i.reconnects = counter("rmqtopo.retry.reconnects", "{connection}", "Connections retry.Consume made after losing one (its first is not counted).")
	var err error
	i.attempts, err = m.Int64Histogram("rmqtopo.retry.delivery.attempt", metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempt number of each settled delivery (1 = first delivery; 0 = malformed header)."),
		metric.WithExplicitBucketBoundaries(1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 50, 100))
	if check(err); err != nil {
		i.attempts, _ = nop.Int64Histogram("rmqtopo.retry.delivery.attempt")
	}
	i.handler, err = m.Float64Histogram("rmqtopo.retry.handler.duration", metric.WithUnit("s"),
		metric.WithDescription("Time the handler ran per delivery, by attempt."),
		metric.WithExplicitBucketBoundaries(.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10))
	if check(err); err != nil {
		i.handler, _ = nop.Float64Histogram("rmqtopo.retry.handler.duration")
	}
	i.pending, err = m.Int64UpDownCounter("rmqtopo.retry.confirms.pending", metric.WithUnit("{message}"),
		metric.WithDescription("Retry and dead-letter copies published and waiting for the broker's confirmation."))
	if check(err); err != nil {
		i.pending, _ = nop.Int64UpDownCounter("rmqtopo.retry.confirms.pending")
	}
	return i
}

// Observer methods are called without a context; the SDK takes one for
// exemplars, which a settlement has none of.
var bg = context.Background()

// perQueue holds a queue's attribute sets, made once: building a set sorts
// and hashes it, which cost more than the measurement itself.
type perQueue struct {
	dest    attribute.KeyValue // messaging.destination.name
	queue   metric.MeasurementOption
	outcome [retry.Requeued + 1]metric.MeasurementOption
	// spanName and spanOpts name and start every span of the queue: its
	// kind and the attributes a sampler may look at.
	spanName string
	spanOpts []trace.SpanStartOption
	attempts sync.Map // int -> metric.MeasurementOption
	reasons  sync.Map // string -> metric.MeasurementOption
}

func (t *Telemetry) perQueue(queue string) *perQueue {
	if p, ok := t.queues.Load(queue); ok {
		return p.(*perQueue)
	}
	q := semconv.MessagingDestinationName(queue)
	p := &perQueue{
		dest:     q,
		queue:    metric.WithAttributeSet(attribute.NewSet(q)),
		spanName: "process " + queue,
		spanOpts: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(semconv.MessagingSystemRabbitMQ, semconv.MessagingOperationTypeProcess,
				semconv.MessagingOperationName("process"), q)},
	}
	for o := range p.outcome {
		p.outcome[o] = metric.WithAttributeSet(attribute.NewSet(q, attrOutcome.String(outcomeName(retry.Outcome(o)))))
	}
	v, _ := t.queues.LoadOrStore(queue, p)
	return v.(*perQueue)
}

// byAttempt is the queue's attribute set with an attempt number.
func (p *perQueue) byAttempt(attempt int) metric.MeasurementOption {
	if o, ok := p.attempts.Load(attempt); ok {
		return o.(metric.MeasurementOption)
	}
	o := metric.WithAttributeSet(attribute.NewSet(p.dest, attrAttempt.Int(attempt)))
	p.attempts.Store(attempt, o)
	return o
}

// byReason is the queue's attribute set with a dead-letter reason.
func (p *perQueue) byReason(reason string) metric.MeasurementOption {
	if o, ok := p.reasons.Load(reason); ok {
		return o.(metric.MeasurementOption)
	}
	o := metric.WithAttributeSet(attribute.NewSet(p.dest, attrReason.String(reason)))
	p.reasons.Store(reason, o)
	return o
}

// Retried implements retry.Observer.
func (t *Telemetry) Retried(queue string, attempt int) {
	t.m.retries.Add(bg, 1, t.perQueue(queue).byAttempt(attempt))
}

// DeadLettered implements retry.Observer.
func (t *Telemetry) DeadLettered(queue, reason string) {
	t.m.deadLetters.Add(bg, 1, t.perQueue(queue).byReason(reason))
}

// Settled implements retry.Observer.
func (t *Telemetry) Settled(s retry.Settlement) {
	p := t.perQueue(s.Queue)
	byOutcome := p.queue
	if s.Outcome >= 0 && int(s.Outcome) < len(p.outcome) {
		byOutcome = p.outcome[s.Outcome]
	}
	t.m.deliveries.Add(bg, 1, byOutcome)
	if s.Err != nil {
		t.m.settleErrs.Add(bg, 1, byOutcome)
	}
	t.m.attempts.Record(bg, int64(s.Attempt), p.queue)
	if s.Handled > 0 {
		t.m.handler.Record(bg, s.Handled.Seconds(), p.byAttempt(s.Attempt))
	}
}

// ConfirmsPending implements retry.Observer.
func (t *Telemetry) ConfirmsPending(queue string, delta int) {
	t.m.pending.Add(bg, int64(delta), t.perQueue(queue).queue)
}

// Connected implements retry.Observer: it counts reconnections. The first
// connection makes the counter exist at 0.
func (t *Telemetry) Connected(queue string, reconnect bool) {
	n := int64(0)
	if reconnect {
		n = 1
	}
	t.m.reconnects.Add(bg, n, t.perQueue(queue).queue)
}
