package retry_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/rabbitmq"
	"github.com/rmqtopo/rmqtopo/retry"
)

// nativeEnv declares the work queue of the native layout (RabbitMQ
// 4.3.1+): a quorum queue that delays its own retries, with the
// arguments contract.NativeArguments gives for delays, dead-lettering to
// its DLX and DLQ. It skips on an older broker.
func nativeEnv(tb testing.TB, delays []time.Duration, jitter bool) *env {
	tb.Helper()
	return nativeEnvOn(tb, brokertest.Get(tb), delays, jitter)
}

// nativeEnvOn is nativeEnv on broker b.
func nativeEnvOn(tb testing.TB, b *brokertest.Broker, delays []time.Duration, jitter bool) *env {
	tb.Helper()
	if v := b.Version(tb); !nativeBroker(v) {
		tb.Skipf("RabbitMQ %s: the native layout needs %s (RMQTOPO_TEST_RABBITMQ=4.3)", v, nativeSince)
	}
	vhost := b.NewVhost(tb)
	conn := b.Dial(tb, vhost)
	ch, err := conn.Channel()
	if err != nil {
		tb.Fatal(err)
	}
	defer ch.Close()
	args := amqp.Table{"x-queue-type": "quorum", "x-dead-letter-exchange": contract.DeadLetterExchange(workQueue)}
	for k, v := range contract.NativeArguments(delays, jitter) {
		args[k] = v
	}
	dlx, dlq := contract.DeadLetterExchange(workQueue), contract.DeadLetterQueue(workQueue)
	for _, err := range []error{
		ch.ExchangeDeclare(dlx, "fanout", true, false, false, false, nil),
		func() error {
			_, err := ch.QueueDeclare(dlq, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
			return err
		}(),
		ch.QueueBind(dlq, "", dlx, false, nil),
		func() error { _, err := ch.QueueDeclare(workQueue, true, false, false, false, args); return err }(),
	} {
		if err != nil {
			tb.Fatalf("declaring the native topology: %v", err)
		}
	}
	return &env{b: b, vhost: vhost, conn: conn}
}

// nativeBroker reports whether a broker of version v ("4.3.6") delays
// retries inside a queue, which the native layout needs.
func nativeBroker(v string) bool {
	p, _ := rabbitmq.ProfileOf(v)
	return p.NativeDelayedRetry()
}

// nativeSince is the first release with native delayed retry, for skips.
var nativeSince = rabbitmq.First(rabbitmq.Profile.NativeDelayedRetry)

// arrivals records when each message's handler ran, per attempt.
type arrivals struct {
	mu     sync.Mutex
	at     map[string][]time.Time
	notify chan struct{}
}

func newArrivals() *arrivals {
	return &arrivals{at: map[string][]time.Time{}, notify: make(chan struct{}, 1)}
}

func (a *arrivals) add(id string) int {
	a.mu.Lock()
	a.at[id] = append(a.at[id], time.Now())
	n := len(a.at[id])
	a.mu.Unlock()
	select {
	case a.notify <- struct{}{}:
	default:
	}
	return n
}

func (a *arrivals) of(id string) []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]time.Time(nil), a.at[id]...)
}

// checkGaps fails if a message came back before its delay: the handler of
// attempt k+1 ran at least delays[k-1] after the handler of attempt k.
func checkGaps(t *testing.T, id string, at []time.Time, delays []time.Duration) {
	t.Helper()
	for k := 1; k < len(at); k++ {
		gap := at[k].Sub(at[k-1])
		t.Logf("%s attempt %d after %s (delay %s)", id, k+1, gap.Round(time.Millisecond), delays[k-1])
		if gap < delays[k-1] {
			t.Errorf("%s attempt %d came after %s, before its delay %s", id, k+1, gap, delays[k-1])
		}
	}
}

// dlqReasons reads the DLQ: message id -> reason and attempt headers, and
// message id -> its first failure header.
func dlqReasons(t *testing.T, e *env) (reasons map[string]string, firstFailure map[string]time.Time) {
	t.Helper()
	ch := e.channel(t)
	reasons, firstFailure = map[string]string{}, map[string]time.Time{}
	for {
		d, ok, err := ch.Get(contract.DeadLetterQueue(workQueue), false)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return reasons, firstFailure
		}
		reasons[d.MessageId] = fmt.Sprintf("%v@%v", d.Headers[contract.HeaderDeadLetterReason], d.Headers[contract.HeaderAttempt])
		if s, ok := d.Headers[contract.HeaderFirstFailure].(string); ok {
			firstFailure[d.MessageId], _ = time.Parse(time.RFC3339Nano, s)
		}
		if _, ok := d.Headers[contract.AnnotationFirstFailure]; ok {
			t.Errorf("DLQ: %s carries the annotation %s; want it as %s only", d.MessageId, contract.AnnotationFirstFailure, contract.HeaderFirstFailure)
		}
	}
}

// waitDLQ waits until the DLQ holds n messages.
func waitDLQ(t *testing.T, e *env, n int, guard time.Duration) {
	t.Helper()
	for deadline := waitguard.Deadline(guard); e.depth(t, contract.DeadLetterQueue(workQueue)) < n; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the DLQ holds %d messages; want %d", e.depth(t, contract.DeadLetterQueue(workQueue)), n)
		}
	}
}

// runNative publishes ids to the native work queue and consumes it with
// h, recording arrivals, until every id has settled for good (wantEnds
// settlements that are acks or dead-letters).
func runNative(t *testing.T, e *env, ids []string, wantEnds int, guard time.Duration, h func(id string, attempt int) error) (*arrivals, []retry.Settlement) {
	t.Helper()
	arr := newArrivals()
	c := startConsume(t, e, func(_ context.Context, d amqp.Delivery) error {
		n := arr.add(d.MessageId)
		if a, ok := retry.Attempt(d); !ok || a != n {
			t.Errorf("%s: retry.Attempt says %d (%v) on its delivery number %d", d.MessageId, a, ok, n)
		}
		return h(d.MessageId, n)
	}, retry.WithPrefetch(4))
	for _, id := range ids {
		brokertest.PublishConfirmed(t, e.conn, "", workQueue, amqp.Publishing{MessageId: id, DeliveryMode: amqp.Persistent})
	}
	ends := func(all []retry.Settlement) int {
		return count2(all, func(s retry.Settlement) bool { return s.Outcome == retry.Acked || s.Outcome == retry.DeadLettered })
	}
	all := c.obs.waitFor(t, waitguard.For(guard), fmt.Sprintf("%d final settlements", wantEnds), func(all []retry.Settlement) bool {
		return ends(all) >= wantEnds
	})
	return arr, all
}

func count2(all []retry.Settlement, pred func(retry.Settlement) bool) int {
	n := 0
	for _, s := range all {
		if pred(s) {
			n++
		}
	}
	return n
}

// TestNativeLinear: on a native queue whose schedule the broker computes
// (linear, 300 ms steps up to 900 ms), a failure is returned with
// basic.reject and the broker holds it: attempts 1 to 4, each after at
// least its delay, numbered by the broker's delivery count, then the DLQ
// as exhausted at attempt 4. A permanent failure goes to the DLQ at once.
func TestNativeLinear(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	delays := []time.Duration{300 * ms, 600 * ms, 900 * ms}
	if _, _, ok := contract.BrokerExpressible(delays); !ok {
		t.Fatal("the test's schedule is not one the broker computes")
	}
	e := nativeEnv(t, delays, false)
	arr, all := runNative(t, e, []string{"fails", "bad"}, 2, 4*time.Second, func(id string, _ int) error {
		if id == "bad" {
			return retry.Permanent(errors.New("malformed"))
		}
		return errors.New("fails")
	})
	checkNative(t, e, arr, all, delays)
}

// TestNativeModified: on a native queue whose schedule the broker cannot
// compute (200, 400, 800 ms), each failure is held until its time over
// AMQP 1.0 (modified, x-opt-delivery-time); a RetryAfter of 700 ms is
// held that long, and the message then succeeds.
func TestNativeModified(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	delays := []time.Duration{200 * ms, 400 * ms, 800 * ms}
	if _, _, ok := contract.BrokerExpressible(delays); ok {
		t.Fatal("the test's schedule is one the broker computes")
	}
	e := nativeEnv(t, delays, false)
	arr, all := runNative(t, e, []string{"fails", "bad", "later"}, 3, 4*time.Second, func(id string, n int) error {
		switch {
		case id == "bad":
			return retry.Permanent(errors.New("malformed"))
		case id == "later" && n == 1:
			return retry.RetryAfter(700 * ms)
		case id == "later":
			return nil
		}
		return errors.New("fails")
	})
	first := checkNative(t, e, arr, all, delays)
	// Issue 46: the DLQ copy's first failure is the first attempt's, which
	// the modified outcome's annotation carried through the retries; it
	// was the last attempt's before.
	if fails := arr.of("fails"); len(fails) > 1 && !first["fails"].Before(fails[1]) {
		t.Errorf("DLQ: fails first failed at %s, after its second attempt ran (%s); want its first attempt's failure", first["fails"], fails[1])
	}
	later := arr.of("later")
	if len(later) != 2 {
		t.Fatalf("later was handled %d times; want 2", len(later))
	}
	checkGaps(t, "later", later, []time.Duration{700 * ms})
}

// checkNative checks what both routes share: "fails" ran once per attempt
// of the schedule, none early, then went to the DLQ as exhausted; "bad"
// went there at once as rejected. It returns the DLQ copies' first
// failures by message id.
func checkNative(t *testing.T, e *env, arr *arrivals, all []retry.Settlement, delays []time.Duration) map[string]time.Time {
	t.Helper()
	fails := arr.of("fails")
	if len(fails) != len(delays)+1 {
		t.Errorf("fails was handled %d times; want %d, one per attempt", len(fails), len(delays)+1)
	}
	checkGaps(t, "fails", fails, delays)
	for _, s := range all {
		if s.MessageID == "fails" && s.Outcome == retry.Retried && s.Attempt > len(delays) {
			t.Errorf("fails retried at attempt %d, past the schedule", s.Attempt)
		}
	}
	if n := len(arr.of("bad")); n != 1 {
		t.Errorf("bad was handled %d times; want once", n)
	}
	waitDLQ(t, e, 2, time.Second)
	got, first := dlqReasons(t, e)
	want := map[string]string{"fails": fmt.Sprintf("exhausted@%d", len(delays)+1), "bad": "rejected@1"}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("DLQ: %s is %q; want %q (all: %v)", id, got[id], w, got)
		}
	}
	return first
}

// TestNativeSurvivesClosedConnection: on both settle routes, closing the
// consumer's connection in the middle of a run loses nothing: every
// message, each failing once, is acked in the end, and none reaches the
// DLQ. (A delivery unsettled when the connection closed comes back at
// once, counted by the broker as a failed delivery.)
func TestNativeSurvivesClosedConnection(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	for name, delays := range map[string][]time.Duration{
		"reject":   {200 * ms, 400 * ms, 600 * ms, 800 * ms},
		"modified": {200 * ms, 300 * ms, 500 * ms, 800 * ms},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := nativeEnv(t, delays, false)
			arr := newArrivals()
			c := startConsume(t, e, func(_ context.Context, d amqp.Delivery) error {
				if arr.add(d.MessageId) == 1 {
					return errors.New("fails once")
				}
				return nil
			}, retry.WithPrefetch(4))
			const n = 60
			var msgs []amqp.Publishing
			for i := range n {
				msgs = append(msgs, amqp.Publishing{MessageId: fmt.Sprintf("m%d", i), DeliveryMode: amqp.Persistent})
			}
			e.publishMany(t, "", workQueue, msgs)
			c.obs.waitFor(t, waitguard.For(5*time.Second), "a third of the messages settled", func(all []retry.Settlement) bool { return len(all) >= n/3 })
			c.closeConnection(t, e.b)
			acked := func(all []retry.Settlement) map[string]bool {
				m := map[string]bool{}
				for _, s := range all {
					if s.Outcome == retry.Acked {
						m[s.MessageID] = true
					}
				}
				return m
			}
			c.obs.waitFor(t, waitguard.For(10*time.Second), "every message acked", func(all []retry.Settlement) bool { return len(acked(all)) == n })
			if d := e.depth(t, contract.DeadLetterQueue(workQueue)); d != 0 {
				t.Errorf("the DLQ holds %d messages; each failed only once", d)
			}
		})
	}
}

// TestConsumeMissingTopologyIsNotNative: a queue with no retry exchange
// whose arguments name no native schedule (here: a plain quorum queue) is
// a missing topology at the first start, on every broker: 3.x speaks no
// AMQP 1.0 on its AMQP port, 4.x answers with the queue's arguments.
func TestConsumeMissingTopologyIsNotNative(t *testing.T) {
	t.Parallel()
	b := brokertest.Get(t)
	vhost := b.NewVhost(t)
	ch, err := b.Dial(t, vhost).Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(workQueue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	// A guard: one dial, a passive declare and one AMQP 1.0 request.
	ctx, cancel := context.WithTimeout(context.Background(), waitguard.For(3*time.Second))
	defer cancel()
	err = retry.Consume(ctx, retry.DialURL(b.AMQPURLFor(vhost), amqp.Config{}), workQueue,
		func(context.Context, amqp.Delivery) error { return nil }, retry.WithLogger(testLogger(t)))
	switch {
	case ctx.Err() != nil:
		t.Fatalf("Consume ran until its context ended (%v)", err)
	case err == nil || !strings.Contains(err.Error(), "retry topology missing") || !strings.Contains(err.Error(), contract.RetryExchange(workQueue)):
		t.Errorf("Consume: %v; want retry topology missing, naming %q", err, contract.RetryExchange(workQueue))
	}
}
