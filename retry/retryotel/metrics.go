package retryotel

import (
	"context"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/rmqtopo/rmqtopo/retry"
)

// instruments are the metrics of the package comment. The counters are
// observable: the helper's calls add to an atomic per series (counter),
// which the meter reads when it collects. A synchronous instrument's Add
// resolves its attribute set and looks its series up on every call, for
// every delivery; a counter read at collection costs that once per series.
// Only the histograms are recorded per delivery (there is no observable
// histogram).
type instruments struct {
	attempts metric.Int64Histogram
	handler  metric.Float64Histogram
}

// newInstruments creates t's instruments in m. An instrument that fails is
// reported and replaced by a no-op one, so that telemetry never stops a
// consumer.
func (t *Telemetry) newInstruments(m metric.Meter) {
	nop := noop.Meter{}
	check := func(err error) bool {
		if err != nil {
			otel.Handle(err)
		}
		return err != nil
	}
	counter := func(name, unit, desc string, pick func(*perQueue, metric.Int64Observer)) {
		_, err := m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc),
			metric.WithInt64Callback(t.observeQueues(pick)))
		check(err)
	}
	counter("rmqtopo.retry.deliveries", "{delivery}", "Deliveries settled, by outcome.",
		func(p *perQueue, o metric.Int64Observer) { observeAll(o, p.deliveries[:]) })
	counter("rmqtopo.retry.dead_letters", "{message}", "Messages the helper sent to the DLQ, by reason.",
		func(p *perQueue, o metric.Int64Observer) { observeMap(o, &p.deadLetters) })
	counter("rmqtopo.retry.settle_errors", "{delivery}", "Settlements that failed (copy not confirmed, or ack failed), by outcome.",
		func(p *perQueue, o metric.Int64Observer) { observeAll(o, p.settleErrs[:]) })
	counter("rmqtopo.retry.retries", "{message}", "Retry copies confirmed, by the attempt they become.",
		func(p *perQueue, o metric.Int64Observer) { observeMap(o, &p.retries) })
	counter("rmqtopo.retry.reconnects", "{connection}", "Connections retry.Consume made after losing one (its first is not counted).",
		func(p *perQueue, o metric.Int64Observer) { p.reconnects.observe(o) })
	_, err := m.Int64ObservableUpDownCounter("rmqtopo.retry.confirms.pending", metric.WithUnit("{message}"),
		metric.WithDescription("Retry and dead-letter copies published and waiting for the broker's confirmation."),
		metric.WithInt64Callback(t.observeQueues(func(p *perQueue, o metric.Int64Observer) { p.pending.observe(o) })))
	check(err)
	t.m.attempts, err = m.Int64Histogram("rmqtopo.retry.delivery.attempt", metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempt number of each settled delivery (1 = first delivery; 0 = malformed header)."),
		metric.WithExplicitBucketBoundaries(1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 50, 100))
	if check(err) {
		t.m.attempts, _ = nop.Int64Histogram("rmqtopo.retry.delivery.attempt")
	}
	t.m.handler, err = m.Float64Histogram("rmqtopo.retry.handler.duration", metric.WithUnit("s"),
		metric.WithDescription("Time the handler ran per delivery, by attempt."),
		metric.WithExplicitBucketBoundaries(.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10))
	if check(err) {
		t.m.handler, _ = nop.Float64Histogram("rmqtopo.retry.handler.duration")
	}
}

// observeQueues is a callback that observes, with pick, every queue t has
// seen.
func (t *Telemetry) observeQueues(pick func(*perQueue, metric.Int64Observer)) metric.Int64Callback {
	return func(_ context.Context, o metric.Int64Observer) error {
		t.queues.Range(func(_, p any) bool {
			pick(p.(*perQueue), o)
			return true
		})
		return nil
	}
}

// counter is one series of an observable counter.
type counter struct {
	n atomic.Int64
	// used: added to at least once. Only a series used is observed, as
	// a synchronous counter's exists from its first Add on.
	used atomic.Bool
	set  metric.ObserveOption
}

func newCounter(attrs ...attribute.KeyValue) *counter {
	return &counter{set: metric.WithAttributeSet(attribute.NewSet(attrs...))}
}

func (c *counter) add(n int64) {
	c.n.Add(n)
	if !c.used.Load() {
		c.used.Store(true)
	}
}

func (c *counter) observe(o metric.Int64Observer) {
	if c.used.Load() {
		o.Observe(c.n.Load(), c.set)
	}
}

func observeAll(o metric.Int64Observer, cs []*counter) {
	for _, c := range cs {
		c.observe(o)
	}
}

func observeMap(o metric.Int64Observer, m *sync.Map) {
	m.Range(func(_, c any) bool {
		c.(*counter).observe(o)
		return true
	})
}

// Observer methods are called without a context; the SDK takes one for
// exemplars, which a settlement has none of.
var bg = context.Background()

// perQueue holds a queue's series and attribute sets, made once: building
// a set sorts and hashes it, which costs more than the measurement itself.
type perQueue struct {
	name string
	dest attribute.KeyValue // messaging.destination.name
	// deliveries and settleErrs are by outcome; the last, by the queue
	// alone, for an outcome this package does not know.
	deliveries  [retry.Requeued + 2]*counter
	settleErrs  [retry.Requeued + 2]*counter
	pending     *counter
	reconnects  *counter
	retries     sync.Map // attempt int -> *counter
	deadLetters sync.Map // reason string -> *counter
	// byQueue records delivery.attempt; handler (attempt int ->
	// []metric.RecordOption) records handler.duration. Slices made once:
	// a variadic option passed to an instrument is otherwise a slice
	// allocated per call.
	byQueue []metric.RecordOption
	handler sync.Map
	// spanName and spanOpts name and start every span of the queue: its
	// kind and the attributes a sampler may look at.
	spanName string
	spanOpts []trace.SpanStartOption
}

func (t *Telemetry) perQueue(queue string) *perQueue {
	// Most services consume one queue: the last one seen is its own.
	if p := t.last.Load(); p != nil && p.name == queue {
		return p
	}
	if p, ok := t.queues.Load(queue); ok {
		t.last.Store(p.(*perQueue))
		return p.(*perQueue)
	}
	v, _ := t.queues.LoadOrStore(queue, newPerQueue(queue))
	t.last.Store(v.(*perQueue))
	return v.(*perQueue)
}

func newPerQueue(queue string) *perQueue {
	q := semconv.MessagingDestinationName(queue)
	p := &perQueue{
		name:       queue,
		dest:       q,
		pending:    newCounter(q),
		reconnects: newCounter(q),
		byQueue:    []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(q))},
		spanName:   "process " + queue,
		spanOpts: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(semconv.MessagingSystemRabbitMQ, semconv.MessagingOperationTypeProcess,
				semconv.MessagingOperationName("process"), q)},
	}
	for o := range p.deliveries {
		attrs := []attribute.KeyValue{q}
		if o < len(p.deliveries)-1 {
			attrs = append(attrs, attrOutcome.String(outcomeName(retry.Outcome(o))))
		}
		p.deliveries[o], p.settleErrs[o] = newCounter(attrs...), newCounter(attrs...)
	}
	return p
}

// outcome is the index of o in deliveries and settleErrs.
func (p *perQueue) outcome(o retry.Outcome) int {
	if o >= 0 && int(o) < len(p.deliveries)-1 {
		return int(o)
	}
	return len(p.deliveries) - 1
}

// byAttempt is the queue's handler.duration options with an attempt
// number.
func (p *perQueue) byAttempt(attempt int) []metric.RecordOption {
	if o, ok := p.handler.Load(attempt); ok {
		return o.([]metric.RecordOption)
	}
	o := []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(p.dest, attrAttempt.Int(attempt)))}
	p.handler.Store(attempt, o)
	return o
}

// series is m's counter for key, made with attrs the first time.
func series(m *sync.Map, key any, attrs ...attribute.KeyValue) *counter {
	if c, ok := m.Load(key); ok {
		return c.(*counter)
	}
	c, _ := m.LoadOrStore(key, newCounter(attrs...))
	return c.(*counter)
}

// Retried implements retry.Observer.
func (t *Telemetry) Retried(queue string, attempt int) {
	p := t.perQueue(queue)
	series(&p.retries, attempt, p.dest, attrAttempt.Int(attempt)).add(1)
}

// DeadLettered implements retry.Observer.
func (t *Telemetry) DeadLettered(queue, reason string) {
	p := t.perQueue(queue)
	series(&p.deadLetters, reason, p.dest, attrReason.String(reason)).add(1)
}

// Settled implements retry.Observer.
func (t *Telemetry) Settled(s retry.Settlement) {
	p := t.perQueue(s.Queue)
	o := p.outcome(s.Outcome)
	p.deliveries[o].add(1)
	if s.Err != nil {
		p.settleErrs[o].add(1)
	}
	t.m.attempts.Record(bg, int64(s.Attempt), p.byQueue...)
	if s.Handled > 0 {
		t.m.handler.Record(bg, s.Handled.Seconds(), p.byAttempt(s.Attempt)...)
	}
}

// ConfirmsPending implements retry.Observer.
func (t *Telemetry) ConfirmsPending(queue string, delta int) {
	t.perQueue(queue).pending.add(int64(delta))
}

// Connected implements retry.Observer: it counts reconnections. The first
// connection makes the counter exist at 0.
func (t *Telemetry) Connected(queue string, reconnect bool) {
	n := int64(0)
	if reconnect {
		n = 1
	}
	t.perQueue(queue).reconnects.add(n)
}
