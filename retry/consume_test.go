package retry_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/retry"
)

// settlements records what Consume reports, safe for concurrent handlers.
type settlements struct {
	retry.NopObserver
	mu     sync.Mutex
	all    []retry.Settlement
	notify chan struct{}
}

func newSettlements() *settlements { return &settlements{notify: make(chan struct{}, 1)} }

func (s *settlements) Settled(x retry.Settlement) {
	s.mu.Lock()
	s.all = append(s.all, x)
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

func (s *settlements) snapshot() []retry.Settlement {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]retry.Settlement(nil), s.all...)
}

// waitFor waits until cond holds for the settlements so far.
func (s *settlements) waitFor(tb testing.TB, timeout time.Duration, what string, cond func([]retry.Settlement) bool) []retry.Settlement {
	tb.Helper()
	return waitUntil(tb, timeout, what, s.notify, s.snapshot, cond, func([]retry.Settlement) string { return "settlements" })
}

// consumer is a retry.Consume running in the background.
type consumer struct {
	name     string // the connection's client-provided name
	obs      *settlements
	cancel   context.CancelFunc
	done     chan error
	stopOnce sync.Once
}

// startConsume runs retry.Consume on e's work queue until the test ends.
func startConsume(tb testing.TB, e *env, h retry.Handler, opts ...retry.ConsumeOption) *consumer {
	tb.Helper()
	c := &consumer{name: fmt.Sprintf("retry-test %s %d", tb.Name(), time.Now().UnixNano()), obs: newSettlements(), done: make(chan error, 1)}
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(c.name)
	dial := retry.DialURL(e.b.AMQPURLFor(e.vhost), amqp.Config{Heartbeat: 5 * time.Second, Properties: props})
	opts = append([]retry.ConsumeOption{retry.WithLogger(discardLogger()), retry.WithObserver(c.obs),
		retry.WithReconnectBackoff(50*time.Millisecond, time.Second)}, opts...)
	var ctx context.Context
	ctx, c.cancel = context.WithCancel(context.Background())
	go func() { c.done <- retry.Consume(ctx, dial, workQueue, h, opts...) }()
	tb.Cleanup(func() { c.stop(tb) })
	return c
}

// stop cancels Consume and waits for it to return nil. Only the first
// call waits.
func (c *consumer) stop(tb testing.TB) {
	tb.Helper()
	c.stopOnce.Do(func() {
		c.cancel()
		// A guard: Consume returns once its handlers settled, in
		// milliseconds, or after a handler's 0.5 s of work within its
		// shutdown grace (TestConsumeShutdownGrace).
		guard := waitguard.For(time.Second)
		select {
		case err := <-c.done:
			if err != nil {
				tb.Errorf("Consume returned %v", err)
			}
		case <-time.After(guard):
			tb.Errorf("Consume still running %v after its context was cancelled", guard)
		}
	})
}

// closeConnection closes the consumer's connection through the management
// API, as an operator (or a broker shutting it) would.
func (c *consumer) closeConnection(tb testing.TB, b *brokertest.Broker) {
	tb.Helper()
	mgmt := b.Mgmt(tb)
	// A guard: a connection shows in the management API within a
	// statistics interval (1 s on test nodes); up to 5 s seen under load.
	for deadline := waitguard.Deadline(5 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		conns, err := mgmt.ListConnections()
		if err != nil {
			tb.Fatalf("listing connections: %v", err)
		}
		for _, ci := range conns {
			if ci.ClientProperties["connection_name"] == c.name {
				res, err := mgmt.CloseConnection(ci.Name)
				if err != nil {
					tb.Fatalf("closing connection %q: %v", ci.Name, err)
				}
				res.Body.Close()
				return
			}
		}
	}
	tb.Fatalf("connection %q never showed in the management API", c.name)
}

// TestConsumeOutboxScheduleExhausts: an always-failing message on the
// outbox seed's schedule (retries after 2s, 5s and 15s) is delivered as
// attempts 1, 2, 3 and 4, then dead-lettered with reason exhausted, which
// the helper returns and logs exactly once.
func TestConsumeOutboxScheduleExhausts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, topo{layout: "shared", queueType: "quorum", delays: []string{"2s", "5s", "15s"}}, nil)
	var logs syncBuffer
	c := startConsume(t, e, func(context.Context, amqp.Delivery) error { return errors.New("always fails") },
		retry.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	e.publish(t, amqp.Publishing{MessageId: "outbox-1", Body: []byte("x")})

	// A guard against a lost message, not a timing goal: the run needs
	// its 22 s of delays and a little (22 s measured).
	all := c.obs.waitFor(t, waitguard.For(24*time.Second), "a dead-letter", func(all []retry.Settlement) bool {
		return len(all) > 0 && all[len(all)-1].Outcome == retry.DeadLettered
	})
	var got []string
	for _, s := range all {
		got = append(got, fmt.Sprintf("%d %v %s %v", s.Attempt, s.Outcome, s.Reason, s.Err))
	}
	want := []string{"1 retry  <nil>", "2 retry  <nil>", "3 retry  <nil>", "4 dead-letter exhausted <nil>"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("settlements: attempt, outcome, reason, error (-want +got):\n%s", diff)
	}
	// The DLQ copy was confirmed before the dead-letter settled: it is
	// there, and read in milliseconds.
	dl := brokertest.Drain(t, e.conn, contract.DeadLetterQueue(workQueue), 1, waitguard.For(100*time.Millisecond))[0]
	if dl.Headers[contract.HeaderDeadLetterReason] != contract.ReasonExhausted || dl.Headers[contract.HeaderAttempt] != "4" {
		t.Errorf("DLQ copy: reason %v, attempt %v; want exhausted, 4", dl.Headers[contract.HeaderDeadLetterReason], dl.Headers[contract.HeaderAttempt])
	}
	// A window, not a guard: a fifth settlement (a duplicate) would show
	// within it. A busy machine can only make it catch less, never red.
	time.Sleep(300 * time.Millisecond)
	if n := len(c.obs.snapshot()); n != 4 {
		t.Errorf("%d settlements; want 4", n)
	}
	if n := strings.Count(logs.String(), `msg="retry: message dead-lettered"`); n != 1 || !strings.Contains(logs.String(), "reason=exhausted") {
		t.Errorf("dead-letter logged %d times; want once, with reason=exhausted. Log:\n%s", n, logs.String())
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// failing decides, the same way every time, whether attempt of message id
// fails: about one in five does, and every attempt of one message in 500
// (ids ending in 000 or 500), so that some certainly end in the DLQ.
func failing(id string, attempt int) bool {
	if strings.HasSuffix(id, "000") || strings.HasSuffix(id, "500") {
		return true
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	return rand.New(rand.NewPCG(h.Sum64(), uint64(attempt))).IntN(5) == 0
}

// lossRun is a run of n messages with 20% failures on a topology of four
// attempts, through Consume, whose connection is broken by breaks at the
// given numbers of settlements.
type lossRun struct {
	n        int
	attempts int // of the topology
	breaks   []int
	brk      func(t *testing.T, c *consumer)
}

// run publishes, waits for every message to end, and checks that each
// ended as predicted: acked, or in the DLQ as exhausted. Duplicates are
// counted and reported, not failed.
func (r lossRun) run(t *testing.T, e *env) {
	want := map[string]string{}
	wantDLQ := 0
	for i := range r.n {
		id := fmt.Sprintf("m%05d", i)
		want[id] = "ack"
		a := 1
		for a <= r.attempts && failing(id, a) {
			a++
		}
		if a > r.attempts {
			want[id], wantDLQ = "dlq:"+contract.ReasonExhausted, wantDLQ+1
		}
	}
	c := startConsume(t, e, func(_ context.Context, d amqp.Delivery) error {
		if a, _ := retry.Attempt(d); failing(d.MessageId, a) {
			return errors.New("random failure")
		}
		return nil
	}, retry.WithPrefetch(32))
	msgs := make([]amqp.Publishing, r.n)
	for i := range msgs {
		msgs[i] = amqp.Publishing{MessageId: fmt.Sprintf("m%05d", i), DeliveryMode: amqp.Persistent, Body: []byte("payload")}
	}
	start := time.Now()
	e.publishMany(t, bizExchange, bizKey, msgs)
	// Guards, not timing goals. A run takes 7 to 9 s (3,000 and 10,000
	// messages, two broken connections) in make test: each of these
	// waits a part of it. 12 s and 18 s keep the 2 and 3 minutes these
	// guards had.
	for _, at := range r.breaks {
		c.obs.waitFor(t, waitguard.For(12*time.Second), fmt.Sprintf("%d settlements", at), func(all []retry.Settlement) bool { return len(all) >= at })
		r.brk(t, c)
	}
	acked := func(all []retry.Settlement) map[string]int {
		m := map[string]int{}
		for _, s := range all {
			if s.Outcome == retry.Acked && s.Err == nil {
				m[s.MessageID]++
			}
		}
		return m
	}
	c.obs.waitFor(t, waitguard.For(18*time.Second), "every ack", func(all []retry.Settlement) bool { return len(acked(all)) >= r.n-wantDLQ })
	// A connection of its own: e's may have died with a node restart.
	conn := e.b.Dial(t, e.vhost)
	// A guard: the dead-lettered copies are in the DLQ, or in their last
	// delay (0.2 s); 0.15 s measured. 6 s keeps the minute it had.
	dlq := brokertest.Drain(t, conn, contract.DeadLetterQueue(workQueue), wantDLQ, waitguard.For(6*time.Second))
	// A window: duplicates still on their way would show by now. A busy
	// machine can only make it catch fewer, never red.
	time.Sleep(500 * time.Millisecond)
	extra := e.depth(t, contract.DeadLetterQueue(workQueue))
	// The queue's depth counted these: they are there.
	dlq = append(dlq, brokertest.Drain(t, conn, contract.DeadLetterQueue(workQueue), extra, waitguard.For(100*time.Millisecond))...)
	all := c.obs.snapshot()
	got, ends := map[string]string{}, map[string]int{}
	for id, k := range acked(all) {
		got[id], ends[id] = "ack", k
	}
	for _, d := range dlq {
		reason, _ := d.Headers[contract.HeaderDeadLetterReason].(string)
		got[d.MessageId] = "dlq:" + reason
		ends[d.MessageId]++
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("final state per message (-want +got):\n%s", diff)
	}
	dups, failed := 0, 0
	for _, k := range ends {
		dups += k - 1
	}
	for _, s := range all {
		if s.Err != nil {
			failed++
		}
	}
	t.Logf("%d messages (%d dead-lettered) in %v: %d settlements, %d settle errors while connections broke; duplicates: %d ends in all, %d of them in the DLQ",
		r.n, wantDLQ, time.Since(start).Round(time.Millisecond), len(all), failed, dups, extra)
	if d := e.depth(t, workQueue); d != 0 {
		t.Errorf("work queue holds %d", d)
	}
}

// TestConsumeSurvivesClosedConnections: 10,000 messages, one in five
// attempts failing, and the broker closes the consumer's connection twice
// (management API DELETE /api/connections/NAME). Consume reconnects and
// every message ends acked or dead-lettered.
func TestConsumeSurvivesClosedConnections(t *testing.T) {
	t.Parallel()
	e := newEnv(t, topo{layout: "shared", queueType: "quorum", immediate: 1, delays: []string{"100ms", "200ms"}}, nil)
	lossRun{n: 10_000, attempts: 4, breaks: []int{2_000, 6_000},
		brk: func(t *testing.T, c *consumer) { c.closeConnection(t, e.b) },
	}.run(t, e)
}

// TestConsumeSurvivesNodeRestart: a node of its own is restarted under a
// running Consume; it reconnects once the node is back and every message
// ends acked or dead-lettered.
func TestConsumeSurvivesNodeRestart(t *testing.T) {
	t.Parallel()
	// A guard on starting the node and restarting it: 9 s and 20 s
	// measured on a loaded machine (load average 20 on 2 CPUs), less when
	// quiet.
	ctx, cancel := context.WithTimeout(context.Background(), waitguard.For(30*time.Second))
	defer cancel()
	node, b := ownNode(t, ctx, "rmqtopo-restart")
	e := newEnvOn(t, b, topo{layout: "shared", queueType: "quorum", immediate: 1, delays: []string{"100ms", "200ms"}}, nil)
	lossRun{n: 2_000, attempts: 4, breaks: []int{500},
		brk: func(t *testing.T, c *consumer) {
			start := time.Now()
			if err := node.Restart(ctx); err != nil {
				t.Fatalf("restarting the node: %v", err)
			}
			t.Logf("node restarted in %v", time.Since(start).Round(time.Millisecond))
		},
	}.run(t, e)
}

// TestConsumeShutdownGrace: within the grace period a running handler
// finishes and its delivery is settled normally; past it, the handler's
// context is cancelled and the delivery requeued unchanged.
//
// Whichever of the handler's work and the grace should end first is
// short, the other long enough that a busy machine cannot turn the race
// round; the passing test never waits the long one out.
func TestConsumeShutdownGrace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		work  time.Duration // the handler's, unless its context ends it
		grace time.Duration
		want  retry.Outcome
	}{
		// The grace is a guard around the handler's 0.5 s of work.
		{"finishes within the grace", 500 * time.Millisecond, waitguard.For(500 * time.Millisecond), retry.Acked},
		// The work never ends on its own: only the grace's cancel ends it.
		{"cancelled past the grace", time.Hour, 50 * time.Millisecond, retry.Requeued},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, topo{layout: "shared", queueType: "classic", waitType: "classic", delays: []string{"100ms"}}, nil)
			started := make(chan struct{}, 1)
			c := startConsume(t, e, func(ctx context.Context, d amqp.Delivery) error {
				started <- struct{}{}
				select {
				case <-ctx.Done():
					return fmt.Errorf("stopped: %w", ctx.Err())
				case <-time.After(tc.work):
					return nil
				}
			}, retry.WithShutdownGrace(tc.grace))
			e.publish(t, amqp.Publishing{MessageId: "g1", Body: []byte("x")})
			<-started
			c.stop(t)
			all := c.obs.snapshot()
			if len(all) != 1 || all[0].Outcome != tc.want || all[0].Attempt != 1 || all[0].Err != nil {
				t.Fatalf("settlements %+v; want one %v of attempt 1", all, tc.want)
			}
			wantDepth := map[retry.Outcome]int{retry.Acked: 0, retry.Requeued: 1}[tc.want]
			if d := e.depth(t, workQueue); d != wantDepth {
				t.Errorf("work queue holds %d; want %d", d, wantDepth)
			}
			if tc.want == retry.Requeued {
				// Requeued before Consume returned: it is there.
				d := brokertest.Drain(t, e.conn, workQueue, 1, waitguard.For(100*time.Millisecond))[0]
				if _, ok := d.Headers[contract.HeaderAttempt]; ok || !d.Redelivered {
					t.Errorf("requeued delivery: headers %v, redelivered %v; want it unchanged, redelivered", d.Headers, d.Redelivered)
				}
			}
		})
	}
}
