package retryotel

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

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

func queueAttr(queue string) attribute.KeyValue { return semconv.MessagingDestinationName(queue) }

// Retried implements retry.Observer.
func (t *Telemetry) Retried(queue string, attempt int) {
	t.m.retries.Add(bg, 1, metric.WithAttributes(queueAttr(queue), attrAttempt.Int(attempt)))
}

// DeadLettered implements retry.Observer.
func (t *Telemetry) DeadLettered(queue, reason string) {
	t.m.deadLetters.Add(bg, 1, metric.WithAttributes(queueAttr(queue), attrReason.String(reason)))
}

// Settled implements retry.Observer.
func (t *Telemetry) Settled(s retry.Settlement) {
	q := queueAttr(s.Queue)
	byOutcome := metric.WithAttributes(q, attrOutcome.String(outcomeName(s.Outcome)))
	t.m.deliveries.Add(bg, 1, byOutcome)
	if s.Err != nil {
		t.m.settleErrs.Add(bg, 1, byOutcome)
	}
	t.m.attempts.Record(bg, int64(s.Attempt), metric.WithAttributes(q))
	if s.Handled > 0 {
		t.m.handler.Record(bg, s.Handled.Seconds(), metric.WithAttributes(q, attrAttempt.Int(s.Attempt)))
	}
}

// ConfirmsPending implements retry.Observer.
func (t *Telemetry) ConfirmsPending(queue string, delta int) {
	t.m.pending.Add(bg, int64(delta), metric.WithAttributes(queueAttr(queue)))
}

// Connected implements retry.Observer: it counts reconnections. The first
// connection makes the counter exist at 0.
func (t *Telemetry) Connected(queue string, reconnect bool) {
	n := int64(0)
	if reconnect {
		n = 1
	}
	t.m.reconnects.Add(bg, n, metric.WithAttributes(queueAttr(queue)))
}
