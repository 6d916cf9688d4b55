package retryotel_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/ops"
	"github.com/rmqtopo/rmqtopo/rabbitmq"
	"github.com/rmqtopo/rmqtopo/retry"
	"github.com/rmqtopo/rmqtopo/retry/retryotel"
	"github.com/rmqtopo/rmqtopo/spec"
)

func TestMain(m *testing.M) { brokertest.Main(m) }

const queue = "work"

// env is one vhost with the work queue of spec, and a connection to it.
type env struct {
	b     *brokertest.Broker
	vhost string
	conn  *amqp.Connection
}

func newEnv(t testing.TB, queueSpec string) *env {
	t.Helper()
	b := brokertest.Get(t)
	vhost := b.NewVhost(t)
	f, err := spec.Parse("t.yaml", fmt.Appendf(nil, "version: 1\nvhost: %q\nqueues:\n  - name: %s\n%s", vhost, queue, queueSpec))
	if err != nil {
		t.Fatal(err)
	}
	conn := b.Dial(t, vhost)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	brokertest.Declare(t, ch, spec.Expand(f))
	return &env{b: b, vhost: vhost, conn: conn}
}

// consume runs retry.Consume with opts until the test ends.
func (e *env) consume(t *testing.T, h retry.Handler, opts ...retry.ConsumeOption) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	dial := retry.DialURL(e.b.AMQPURLFor(e.vhost), amqp.Config{})
	opts = append(opts, retry.WithLogger(slog.New(slog.DiscardHandler)), retry.WithPrefetch(4))
	go func() { done <- retry.Consume(ctx, dial, queue, h, opts...) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Consume: %v", err)
		}
	})
}

// waitSpans waits until the exporter holds n spans named "process work".
func waitSpans(t *testing.T, exp *tracetest.InMemoryExporter, n int, why string) []sdktrace.ReadOnlySpan {
	t.Helper()
	// A guard around retries of 50 ms each and a replay: well under a
	// second when the machine is idle.
	for deadline := waitguard.Deadline(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		spans := processSpans(exp)
		if len(spans) >= n {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d process spans ended:\n%s", why, len(spans), n, describe(spans))
		}
	}
}

func processSpans(exp *tracetest.InMemoryExporter) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range exp.GetSpans().Snapshots() {
		if s.Name() == "process "+queue {
			out = append(out, s)
		}
	}
	return out
}

// attempt is what the test compares of one process span.
type attempt struct {
	Message string
	Attempt int64
	Outcome string
	Reason  string `cmp:"omitempty"`
	Error   bool
}

func summary(s sdktrace.ReadOnlySpan) attempt {
	a := attempt{Error: s.Status().Code == codes.Error}
	for _, kv := range s.Attributes() {
		switch kv.Key {
		case "messaging.message.id":
			a.Message = kv.Value.AsString()
		case "rmqtopo.retry.attempt":
			a.Attempt = kv.Value.AsInt64()
		case "rmqtopo.retry.outcome":
			a.Outcome = kv.Value.AsString()
		case "rmqtopo.retry.dead_letter_reason":
			a.Reason = kv.Value.AsString()
		}
	}
	return a
}

func describe(spans []sdktrace.ReadOnlySpan) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "  %+v trace %s span %s parent %s\n", summary(s), s.SpanContext().TraceID(), s.SpanContext().SpanID(), s.Parent().SpanID())
	}
	return b.String()
}

func attr(s sdktrace.ReadOnlySpan, key attribute.Key) attribute.Value {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// byMessage groups spans by message id, each group in the order the spans
// started.
func byMessage(spans []sdktrace.ReadOnlySpan) map[string][]sdktrace.ReadOnlySpan {
	out := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		id := summary(s).Message
		out[id] = append(out[id], s)
	}
	for _, ss := range out {
		slices.SortFunc(ss, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	}
	return out
}

// handle fails by the message id's kind: "twice" and "bare" fail their
// first two attempts, "always" every attempt, "reject" permanently; a
// replayed message succeeds. It starts a span of its own, which must be
// the attempt's child.
func handle(tr trace.Tracer) retry.Handler {
	return func(ctx context.Context, d amqp.Delivery) error {
		_, span := tr.Start(ctx, "handler")
		defer span.End()
		if _, replayed := d.Headers[contract.HeaderReplayCount]; replayed {
			return nil
		}
		n, _ := retry.Attempt(d)
		kind, _, _ := strings.Cut(d.MessageId, "-")
		switch {
		case kind == "reject":
			return retry.Permanent(errors.New("malformed order"))
		case kind == "always", n < 3:
			return fmt.Errorf("attempt %d failed", n)
		}
		return nil
	}
}

// TestTraceThroughRetries runs four messages through Consume on a queue
// with two 50 ms retries, then replays its DLQ, and checks the process
// spans, their traces and links, and the metrics.
func TestTraceThroughRetries(t *testing.T) {
	e := newEnv(t, "    retry: {delays: [50ms, 50ms]}\n")
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	tel := retryotel.New(retryotel.WithTracerProvider(tp), retryotel.WithMeterProvider(mp))
	e.consume(t, handle(tp.Tracer("test")), tel.Option())

	// The producer's span, whose context three of the messages carry.
	_, send := tp.Tracer("test").Start(context.Background(), "send", trace.WithSpanKind(trace.SpanKindProducer))
	send.End()
	for _, id := range []string{"twice-1", "bare-1", "always-1", "reject-1"} {
		publishTraced(t, e, id, send.SpanContext())
	}
	// 3 + 3 + 3 + 1 attempts; then the two dead letters are replayed.
	waitSpans(t, exp, 10, "before the replay")
	replayDLQ(t, e)
	spans := byMessage(waitSpans(t, exp, 12, "after the replay"))

	want := map[string][]attempt{
		"twice-1": {{"twice-1", 1, "retried", "", true}, {"twice-1", 2, "retried", "", true}, {"twice-1", 3, "acked", "", false}},
		"bare-1":  {{"bare-1", 1, "retried", "", true}, {"bare-1", 2, "retried", "", true}, {"bare-1", 3, "acked", "", false}},
		"always-1": {{"always-1", 1, "retried", "", true}, {"always-1", 2, "retried", "", true},
			{"always-1", 3, "dead-lettered", contract.ReasonExhausted, true}, {"always-1", 1, "acked", "", false}},
		"reject-1": {{"reject-1", 1, "dead-lettered", contract.ReasonRejected, true}, {"reject-1", 1, "acked", "", false}},
	}
	if diff := cmp.Diff(want, summaries(spans)); diff != "" {
		t.Errorf("process spans by message (-want +got):\n%s", diff)
	}
	for id, ss := range spans {
		checkTrace(t, id, ss, send.SpanContext(), nil)
	}
	checkHandlerSpans(t, exp)
	checkMetrics(t, reader)
}

// replayDLQ replays the work queue's DLQ as `rmqtopo dlq replay` does.
func replayDLQ(t *testing.T, e *env) {
	t.Helper()
	dlq := contract.DeadLetterQueue(queue)
	info, err := e.b.Mgmt(t).GetQueue(e.vhost, dlq)
	if err != nil {
		t.Fatal(err)
	}
	res, err := ops.Replay(context.Background(), e.conn, ops.ReplayOptions{Queue: dlq, QueueType: info.Type})
	if err != nil {
		t.Fatalf("replaying %s: %v", dlq, err)
	}
	if res.Moved != 2 {
		t.Fatalf("replayed %d messages; want 2", res.Moved)
	}
}

// checkTrace checks that the spans of one message, in order, are in one
// trace, each linked to the one before: children of the producer's span
// when the message carried it, else of the first attempt's span.
func checkTrace(t *testing.T, id string, ss []sdktrace.ReadOnlySpan, producer trace.SpanContext, delays []float64) {
	t.Helper()
	parent := producer.SpanID()
	if id == "bare-1" {
		if ss[0].Parent().IsValid() {
			t.Errorf("%s: first attempt has parent %s; want a root span", id, ss[0].Parent().SpanID())
		}
		parent = ss[0].SpanContext().SpanID()
	}
	for i, s := range ss {
		if s.SpanKind() != trace.SpanKindConsumer {
			t.Errorf("%s span %d: kind %v; want consumer", id, i, s.SpanKind())
		}
		if s.SpanContext().TraceID() != ss[0].SpanContext().TraceID() {
			t.Errorf("%s span %d: trace %s; want %s, the first attempt's", id, i, s.SpanContext().TraceID(), ss[0].SpanContext().TraceID())
		}
		if id != "bare-1" && s.SpanContext().TraceID() != producer.TraceID() {
			t.Errorf("%s span %d: trace %s; want the producer's %s", id, i, s.SpanContext().TraceID(), producer.TraceID())
		}
		if i > 0 || id != "bare-1" {
			if s.Parent().SpanID() != parent {
				t.Errorf("%s span %d: parent %s; want %s", id, i, s.Parent().SpanID(), parent)
			}
		}
		var links []trace.SpanID
		for _, l := range s.Links() {
			links = append(links, l.SpanContext.SpanID())
		}
		var want []trace.SpanID
		if i > 0 {
			want = []trace.SpanID{ss[i-1].SpanContext().SpanID()}
		}
		if diff := cmp.Diff(want, links); diff != "" {
			t.Errorf("%s span %d: links (-want +got):\n%s", id, i, diff)
		}
		checkAttributes(t, id, s, delays)
	}
}

// checkAttributes checks the conventions' attributes of a process span;
// delays are the schedule's, in seconds, when the helper knows them (nil:
// per-attempt wait queues, whose delays are the topology's).
func checkAttributes(t *testing.T, id string, s sdktrace.ReadOnlySpan, delays []float64) {
	t.Helper()
	for key, want := range map[attribute.Key]string{
		"messaging.system": "rabbitmq", "messaging.operation.type": "process",
		"messaging.destination.name": queue, "messaging.rabbitmq.destination.routing_key": queue,
	} {
		if got := attr(s, key).AsString(); got != want {
			t.Errorf("%s: %s = %q; want %q", id, key, got, want)
		}
	}
	a := summary(s)
	next := attr(s, "rmqtopo.retry.next_attempt")
	if a.Outcome == "retried" && next.AsInt64() != a.Attempt+1 {
		t.Errorf("%s attempt %d retried: next_attempt %v; want %d", id, a.Attempt, next.Emit(), a.Attempt+1)
	}
	// handle's errors: fmt.Errorf's, or Permanent's around errors.New's.
	if got := attr(s, "error.type").AsString(); a.Error != (got != "") || a.Error && !strings.HasPrefix(got, "*") {
		t.Errorf("%s attempt %d (error %v): error.type %q; want a Go type exactly when it failed", id, a.Attempt, a.Error, got)
	}
	d := attr(s, "rmqtopo.retry.delay")
	switch {
	case delays == nil && d.Type() != attribute.INVALID:
		t.Errorf("%s: delay %v on a per-attempt queue, whose delays the helper does not know", id, d.Emit())
	case delays != nil && a.Outcome == "retried" && (a.Attempt > int64(len(delays)) || d.AsFloat64() != delays[a.Attempt-1]):
		t.Errorf("%s attempt %d retried: delay %v; want the schedule's %v", id, a.Attempt, d.Emit(), delays)
	}
}

// checkHandlerSpans: each handler's own span is a child of its attempt's.
func checkHandlerSpans(t *testing.T, exp *tracetest.InMemoryExporter) {
	t.Helper()
	process := map[trace.SpanID]bool{}
	n := 0
	for _, s := range processSpans(exp) {
		process[s.SpanContext().SpanID()] = true
	}
	for _, s := range exp.GetSpans().Snapshots() {
		if s.Name() != "handler" {
			continue
		}
		n++
		if !process[s.Parent().SpanID()] {
			t.Errorf("handler span's parent %s is no process span", s.Parent().SpanID())
		}
	}
	if n != 12 {
		t.Errorf("%d handler spans; want 12", n)
	}
}

// checkMetrics compares the metrics with what TestTraceThroughRetries did.
func checkMetrics(t *testing.T, reader *sdkmetric.ManualReader) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]int64{}
	add := func(name, key string, attrs attribute.Set, v int64) {
		if got[name] == nil {
			got[name] = map[string]int64{}
		}
		label, _ := attrs.Value(attribute.Key(key))
		got[name][label.Emit()] += v
		if q, _ := attrs.Value("messaging.destination.name"); q.AsString() != queue {
			t.Errorf("%s: messaging.destination.name %q; want %q", name, q.AsString(), queue)
		}
	}
	keys := map[string]string{
		"rmqtopo.retry.deliveries": "rmqtopo.retry.outcome", "rmqtopo.retry.dead_letters": "rmqtopo.retry.dead_letter_reason",
		"rmqtopo.retry.retries": "rmqtopo.retry.attempt", "rmqtopo.retry.confirms.pending": "",
		"rmqtopo.retry.reconnects": "", "rmqtopo.retry.delivery.attempt": "", "rmqtopo.retry.handler.duration": "rmqtopo.retry.attempt",
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch data := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range data.DataPoints {
					add(m.Name, keys[m.Name], p.Attributes, p.Value)
				}
			case metricdata.Histogram[int64]:
				for _, p := range data.DataPoints {
					add(m.Name, keys[m.Name], p.Attributes, int64(p.Count))
					add(m.Name+" sum", "", p.Attributes, p.Sum)
				}
			case metricdata.Histogram[float64]:
				for _, p := range data.DataPoints {
					add(m.Name, keys[m.Name], p.Attributes, int64(p.Count))
				}
			}
		}
	}
	want := map[string]map[string]int64{
		"rmqtopo.retry.deliveries":       {"acked": 4, "retried": 6, "dead-lettered": 2},
		"rmqtopo.retry.dead_letters":     {contract.ReasonExhausted: 1, contract.ReasonRejected: 1},
		"rmqtopo.retry.retries":          {"2": 3, "3": 3},
		"rmqtopo.retry.confirms.pending": {"": 0},
		"rmqtopo.retry.reconnects":       {"": 0},
		// 12 attempts: 1+2+3 three times, 1 for the rejected one, 1 for
		// each replayed one.
		"rmqtopo.retry.delivery.attempt":     {"": 12},
		"rmqtopo.retry.delivery.attempt sum": {"": 21},
		"rmqtopo.retry.handler.duration":     {"1": 6, "2": 3, "3": 3},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
}

// TestHandleCarriesTrace settles one delivery through a Retrier's Handle,
// the option given to retry.New, and checks the retry copy in its wait
// queue: it names the attempt's span for the next to link to and, the
// delivery having carried no context, carries the span's as its own.
func TestHandleCarriesTrace(t *testing.T) {
	e := newEnv(t, "    layout: per-attempt\n    retry: {delays: [1h]}\n")
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	r, err := retry.New(e.conn, queue, retryotel.New(retryotel.WithTracerProvider(tp)).Option())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	brokertest.PublishConfirmed(t, e.conn, "", queue, amqp.Publishing{MessageId: "m1", Body: []byte("x")})
	ch, err := e.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	deliveries, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	handle := r.Handle(func(context.Context, amqp.Delivery) error { return errors.New("failed") })
	select {
	case d := <-deliveries:
		if out, err := handle(context.Background(), d); out != retry.Retried || err != nil {
			t.Fatalf("Handle: %v, %v; want retry, nil", out, err)
		}
	case <-time.After(waitguard.For(time.Second)):
		t.Fatal("no delivery")
	}
	spans := processSpans(exp)
	if len(spans) != 1 {
		t.Fatalf("%d process spans; want 1", len(spans))
	}
	sc := spans[0].SpanContext()
	tp0 := fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID())
	copies := brokertest.Drain(t, e.conn, contract.PerAttemptWaitQueue(queue, 1, time.Hour), 1, waitguard.For(time.Second))
	got := map[string]any{"traceparent": copies[0].Headers["traceparent"], retryotel.HeaderPreviousAttempt: copies[0].Headers[retryotel.HeaderPreviousAttempt]}
	want := map[string]any{"traceparent": tp0, retryotel.HeaderPreviousAttempt: tp0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("retry copy's trace headers (-want +got):\n%s", diff)
	}
}

// TestTraceThroughNativeModified follows messages through a native queue
// whose retries go back by AMQP 1.0's modified outcome (a schedule the
// broker cannot compute: RabbitMQ 4.3.1+). The helper publishes no copy
// there; the trace travels in the outcome's x- annotations, so each
// attempt still links to the one before, and a message that carried no
// context still keeps its attempts in one trace.
func TestTraceThroughNativeModified(t *testing.T) {
	b := brokertest.Get(t)
	if p, err := rabbitmq.ProfileOf(b.Version(t)); err != nil || !p.NativeDelayedRetry() {
		t.Skipf("RabbitMQ %s: the native layout needs %s", b.Version(t), rabbitmq.First(rabbitmq.Profile.NativeDelayedRetry))
	}
	e := newEnv(t, "    type: quorum\n    layout: native\n    retry: {delays: [100ms, 300ms]}\n")
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	tel := retryotel.New(retryotel.WithTracerProvider(tp),
		retryotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))))
	e.consume(t, handle(tp.Tracer("test")), tel.Option())

	_, send := tp.Tracer("test").Start(context.Background(), "send", trace.WithSpanKind(trace.SpanKindProducer))
	send.End()
	for _, id := range []string{"twice-1", "bare-1"} {
		publishTraced(t, e, id, send.SpanContext())
	}
	spans := byMessage(waitSpans(t, exp, 6, "three attempts of each message"))
	want := map[string][]attempt{
		"twice-1": {{"twice-1", 1, "retried", "", true}, {"twice-1", 2, "retried", "", true}, {"twice-1", 3, "acked", "", false}},
		"bare-1":  {{"bare-1", 1, "retried", "", true}, {"bare-1", 2, "retried", "", true}, {"bare-1", 3, "acked", "", false}},
	}
	if diff := cmp.Diff(want, summaries(spans)); diff != "" {
		t.Errorf("process spans by message (-want +got):\n%s", diff)
	}
	for id, ss := range spans {
		checkTrace(t, id, ss, send.SpanContext(), []float64{0.1, 0.3})
	}
}

// publishTraced publishes message id, carrying producer's context unless
// id is bare-1.
func publishTraced(t *testing.T, e *env, id string, producer trace.SpanContext) {
	h := amqp.Table{}
	if id != "bare-1" {
		c := propagation.MapCarrier{}
		propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), producer), c)
		for k, v := range c {
			h[k] = v
		}
	}
	brokertest.PublishConfirmed(t, e.conn, "", queue, amqp.Publishing{MessageId: id, Headers: h, Body: []byte("x")})
}

// summaries are the spans' summaries by message.
func summaries(spans map[string][]sdktrace.ReadOnlySpan) map[string][]attempt {
	got := map[string][]attempt{}
	for id, ss := range spans {
		for _, s := range ss {
			got[id] = append(got[id], summary(s))
		}
	}
	return got
}
