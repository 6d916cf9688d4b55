package retry_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	rabbithole "github.com/michaelklishin/rabbit-hole/v2"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/retry"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

func TestMain(m *testing.M) { brokertest.Main(m) }

// topo describes the one work queue a test provisions.
type topo struct {
	layout    string // "per-attempt" or "shared"
	queueType string // of the work queue: "classic" or "quorum"
	waitType  string // of shared wait queues; "" for the spec's default
	delays    []string
	immediate int
	// returnQueue gives the work queue a return queue (return_queue);
	// noReturnQueue writes return_queue: false.
	returnQueue, noReturnQueue bool
	// retry, when set, is the work queue's retry policy in YAML's flow
	// style ("{fixed: {delay: 30s, attempts: 1}}"), in place of delays.
	retry string
	// release, when set, is the RabbitMQ version the spec's layouts are
	// chosen (spec.Resolve, nothing live) and expanded for, as a plan of
	// a new vhost does; else spec.Expand, whose auto is shared.
	release string
}

const (
	workQueue   = "work"
	bizExchange = "biz"
	bizKey      = "order.created"
)

// yaml renders t as a spec for vhost: a direct exchange "biz" bound to the
// work queue "work" with key "order.created".
func (t topo) yaml(vhost string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "version: 1\nvhost: %q\n", vhost)
	if t.layout != "" {
		fmt.Fprintf(&b, "layout: %s\n", t.layout)
	}
	if t.waitType != "" {
		fmt.Fprintf(&b, "wait_queue_type: %s\n", t.waitType)
	}
	fmt.Fprintf(&b, "exchanges:\n  - name: %s\n    type: direct\n", bizExchange)
	fmt.Fprintf(&b, "queues:\n  - name: %s\n    type: %s\n", workQueue, t.queueType)
	fmt.Fprintf(&b, "    bindings:\n      - exchange: %s\n        routing_key: %s\n", bizExchange, bizKey)
	if t.retry != "" {
		fmt.Fprintf(&b, "    retry: %s\n", t.retry)
	} else {
		fmt.Fprintf(&b, "    retry:\n      delays: [%s]\n", strings.Join(t.delays, ", "))
	}
	fmt.Fprintf(&b, "    immediate_retries: %d\n", t.immediate)
	switch {
	case t.returnQueue:
		b.WriteString("    return_queue: true\n")
	case t.noReturnQueue:
		b.WriteString("    return_queue: false\n")
	}
	return b.String()
}

// env is one test's broker, vhost, connection and topology.
type env struct {
	b     *brokertest.Broker
	vhost string
	conn  *amqp.Connection
	topo  topology.Topology
}

// newEnv provisions t in a fresh vhost. edit, if not nil, may change the
// topology before it is declared.
func newEnv(tb testing.TB, t topo, edit func(*topology.Topology)) *env {
	tb.Helper()
	return newEnvOn(tb, brokertest.Get(tb), t, edit)
}

// newEnvOn is newEnv on broker b.
func newEnvOn(tb testing.TB, b *brokertest.Broker, t topo, edit func(*topology.Topology)) *env {
	tb.Helper()
	vhost := b.NewVhost(tb)
	f, err := spec.Parse("test.yaml", []byte(t.yaml(vhost)))
	if err != nil {
		tb.Fatalf("spec: %v\n%s", err, t.yaml(vhost))
	}
	tp := spec.Expand(f)
	if t.release != "" {
		v, err := topology.ParseVersion(t.release)
		if err != nil {
			tb.Fatal(err)
		}
		spec.Resolve([]*spec.File{f}, spec.Target{RabbitMQ: v})
		tp = spec.ExpandFor(v, f)
	}
	if edit != nil {
		edit(&tp)
	}
	conn := b.Dial(tb, vhost)
	ch, err := conn.Channel()
	if err != nil {
		tb.Fatal(err)
	}
	defer ch.Close()
	putPolicies(tb, b, tp)
	brokertest.Declare(tb, ch, tp)
	return &env{b: b, vhost: vhost, conn: conn, topo: tp}
}

// putPolicies writes t's policies, which carry the work queues'
// dead-lettering and the retry exchanges' alternate exchanges, as apply
// does: before the objects they govern.
func putPolicies(tb testing.TB, b *brokertest.Broker, t topology.Topology) {
	tb.Helper()
	mgmt := b.Mgmt(tb)
	for _, p := range t.Policies {
		res, err := mgmt.PutPolicy(p.Vhost, p.Name, rabbithole.Policy{Pattern: p.Pattern, ApplyTo: p.ApplyTo,
			Priority: int(p.Priority), Definition: rabbithole.PolicyDefinition(p.Definition)})
		if err != nil {
			tb.Fatalf("writing policy %q: %v", p.Name, err)
		}
		_ = res.Body.Close()
	}
}

// channel opens a channel closed at the end of the test.
func (e *env) channel(tb testing.TB) *amqp.Channel {
	tb.Helper()
	ch, err := e.conn.Channel()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ch.Close() })
	return ch
}

// publish publishes msg to the business exchange, confirmed.
func (e *env) publish(tb testing.TB, msg amqp.Publishing) {
	tb.Helper()
	brokertest.PublishConfirmed(tb, e.conn, bizExchange, bizKey, msg)
}

// publishMany publishes msgs on one confirm channel, waiting for all the
// confirmations at the end.
func (e *env) publishMany(tb testing.TB, exchange, key string, msgs []amqp.Publishing) {
	tb.Helper()
	ch, err := e.conn.Channel()
	if err != nil {
		tb.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	// A guard on every confirmation: 10,000 messages take about 2 s (the
	// largest call, TestConsumeSurvivesClosedConnections); 6 s keeps the
	// minute this guard had.
	wctx, cancel := context.WithTimeout(ctx, waitguard.For(6*time.Second))
	defer cancel()
	// In batches: amqp091 scans every outstanding confirmation on each
	// multiple ack, which is quadratic in the number outstanding.
	const batch = 500
	dcs := make([]*amqp.DeferredConfirmation, 0, batch)
	for i, m := range msgs {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, false, false, m)
		if err != nil {
			tb.Fatalf("publishing: %v", err)
		}
		dcs = append(dcs, dc)
		if len(dcs) < batch && i < len(msgs)-1 {
			continue
		}
		for _, dc := range dcs {
			if ok, err := dc.WaitContext(wctx); err != nil || !ok {
				tb.Fatalf("confirm of tag %d: ack=%v err=%v", dc.DeliveryTag, ok, err)
			}
		}
		dcs = dcs[:0]
	}
}

func (e *env) depth(tb testing.TB, queue string) int {
	tb.Helper()
	return e.b.QueueDepth(tb, e.vhost, queue)
}

// event is one delivery seen by a test consumer.
type event struct {
	at        time.Time // when the handler ran
	settled   time.Time // when settling returned
	messageID string
	attempt   int
	attemptOK bool
	headers   amqp.Table
	outcome   retry.Outcome
	err       error // from settling
}

// recorder collects events, safe for concurrent handlers.
type recorder struct {
	mu     sync.Mutex
	events []event
	notify chan struct{}
}

func newRecorder() *recorder { return &recorder{notify: make(chan struct{}, 1)} }

func (r *recorder) add(ev event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

func (r *recorder) snapshot() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.events...)
}

// waitFor waits until cond holds for the events seen so far.
func (r *recorder) waitFor(tb testing.TB, timeout time.Duration, what string, cond func([]event) bool) []event {
	tb.Helper()
	return waitUntil(tb, timeout, what, r.notify, r.snapshot, cond, describe)
}

// waitUntil waits until cond holds for snapshot(), looking again at each
// notify, and fails the test after timeout, showing what it saw. timeout
// is a guard (callers pass waitguard.For of what the wait needs).
func waitUntil[T any](tb testing.TB, timeout time.Duration, what string, notify <-chan struct{},
	snapshot func() []T, cond func([]T) bool, show func([]T) string) []T {
	tb.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		xs := snapshot()
		if cond(xs) {
			return xs
		}
		select {
		case <-notify:
		case <-deadline.C:
			tb.Fatalf("timed out after %v waiting for %s; %d seen: %s", timeout, what, len(xs), show(xs))
		}
	}
}

func describe(evs []event) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "\n  %s attempt=%d/%v outcome=%v err=%v", ev.messageID, ev.attempt, ev.attemptOK, ev.outcome, ev.err)
	}
	return b.String()
}

// consume runs handlers goroutines that consume the work queue through r
// and h, recording every delivery, until the test ends.
func (e *env) consume(tb testing.TB, r *retry.Retrier, handlers int, h retry.Handler) *recorder {
	tb.Helper()
	ch := e.channel(tb)
	if err := ch.Qos(handlers, 0, false); err != nil {
		tb.Fatal(err)
	}
	deliveries, err := ch.Consume(workQueue, "", false, false, false, false, nil)
	if err != nil {
		tb.Fatal(err)
	}
	rec := newRecorder()
	process := r.Handle(h)
	var wg sync.WaitGroup
	for range handlers {
		wg.Go(func() {
			for d := range deliveries {
				attempt, ok := retry.Attempt(d)
				ev := event{at: time.Now(), messageID: d.MessageId, attempt: attempt, attemptOK: ok, headers: d.Headers}
				ev.outcome, ev.err = process(context.Background(), d)
				ev.settled = time.Now()
				rec.add(ev)
			}
		})
	}
	tb.Cleanup(func() {
		ch.Close()
		wg.Wait()
	})
	return rec
}

func newRetrier(tb testing.TB, e *env, opts ...retry.Option) *retry.Retrier {
	tb.Helper()
	opts = append([]retry.Option{retry.WithLogger(testLogger(tb))}, opts...)
	r, err := retry.New(e.conn, workQueue, opts...)
	if err != nil {
		tb.Fatalf("retry.New: %v", err)
	}
	tb.Cleanup(func() { r.Close() })
	return r
}

// counter is an Observer counting retries per attempt and dead-letters
// per reason.
type counter struct {
	retry.NopObserver
	mu           sync.Mutex
	retried      map[int]int
	deadLettered map[string]int
}

func newCounter() *counter {
	return &counter{retried: map[int]int{}, deadLettered: map[string]int{}}
}

func (c *counter) Retried(queue string, attempt int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.retried[attempt]++
}

func (c *counter) DeadLettered(queue, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadLettered[reason]++
}

func (c *counter) counts() (map[int]int, map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := make(map[int]int, len(c.retried))
	for k, v := range c.retried {
		r[k] = v
	}
	d := make(map[string]int, len(c.deadLettered))
	for k, v := range c.deadLettered {
		d[k] = v
	}
	return r, d
}

func count(evs []event, pred func(event) bool) int {
	n := 0
	for _, ev := range evs {
		if pred(ev) {
			n++
		}
	}
	return n
}

// testLogger logs to the test's log.
func testLogger(tb testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tbWriter{tb}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tbWriter struct{ tb testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.tb.Helper()
	w.tb.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// ownNode starts a node of the test's own, of the release under test,
// named prefix-PID, killed when the test ends: for a test that restarts
// or kills its broker.
func ownNode(t *testing.T, ctx context.Context, prefix string) (*brokertest.Node, *brokertest.Broker) {
	t.Helper()
	node, err := brokertest.StartNode(ctx, brokertest.NodeConfig{
		Name: fmt.Sprintf("%s-%d@localhost", prefix, os.Getpid()), BaseDir: t.TempDir()})
	if err != nil {
		t.Fatalf("starting a node of the test's own: %v", err)
	}
	t.Cleanup(node.Kill)
	return node, &brokertest.Broker{MgmtURL: node.MgmtURL(), AMQPURL: node.AMQPURL(), User: "guest", Password: "guest", Node: node}
}
