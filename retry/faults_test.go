package retry_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rabbithole "github.com/michaelklishin/rabbit-hole/v2"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/retry"
)

// TestNewChecksTopology: New fails fast, naming what is missing and saying
// to run rmqtopo apply, until the whole topology exists.
func TestNewChecksTopology(t *testing.T) {
	t.Parallel()
	b := brokertest.Get(t)
	vhost := b.NewVhost(t)
	conn := b.Dial(t, vhost)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()

	steps := []struct {
		declare func() error
		missing string // in New's error; "" once complete
	}{
		{func() error { return nil }, `exchange "work.retry"`},
		{func() error { return ch.ExchangeDeclare("work.retry", "headers", true, false, false, false, nil) }, `exchange "work.dlx"`},
		// The DLQ is not asked for by name (a spec's dlq_name may name it
		// otherwise): the DLX is what the helper publishes to.
		{func() error { return ch.ExchangeDeclare("work.dlx", "fanout", true, false, false, false, nil) }, ""},
	}
	for _, s := range steps {
		if err := s.declare(); err != nil {
			t.Fatal(err)
		}
		r, err := retry.New(conn, workQueue, retry.WithLogger(testLogger(t)))
		if s.missing == "" {
			if err != nil {
				t.Fatalf("New with the whole topology: %v", err)
			}
			r.Close()
			continue
		}
		if err == nil {
			r.Close()
			t.Fatalf("New succeeded without %s", s.missing)
		}
		if msg := err.Error(); !strings.Contains(msg, s.missing) || !strings.Contains(msg, "rmqtopo apply") {
			t.Errorf("New without %s: %q; want it named, and `rmqtopo apply`", s.missing, msg)
		}
	}
	// The failed passive declares did not close the caller's connection.
	if conn.IsClosed() {
		t.Error("the connection was closed")
	}
}

// TestExhaustedReturned: a retry past the schedule is returned by the
// retry exchange (it has no alternate exchange); the helper sends it to the
// DLQ with reason exhausted and reports DeadLettered. Many handlers publish
// at once, routable and returned copies interleaved, so returns must be
// told apart.
func TestExhaustedReturned(t *testing.T) {
	t.Parallel()
	e := newEnv(t, topo{layout: "per-attempt", queueType: "classic", delays: []string{"100ms"}}, nil)
	obs := newCounter()
	r := newRetrier(t, e, retry.WithObserver(obs))
	e.consume(t, r, 8, func(context.Context, amqp.Delivery) error { return errors.New("always fails") })

	// Half the messages start at attempt 2, the last, and are returned at
	// once; the others are retried once (routable) first.
	const n = 40
	msgs := make([]amqp.Publishing, n)
	for i := range msgs {
		msgs[i] = amqp.Publishing{MessageId: fmt.Sprintf("m%02d", i), Body: []byte("same body")}
		if i%2 == 1 {
			msgs[i].Headers = amqp.Table{contract.HeaderAttempt: "2"}
		}
	}
	e.publishMany(t, bizExchange, bizKey, msgs)
	// A guard: half go to the DLQ at once, half after one 0.1 s retry;
	// 0.11 s measured.
	dlq := brokertest.Drain(t, e.conn, contract.DeadLetterQueue(workQueue), n, waitguard.For(time.Second))
	got := map[string]string{}
	for _, d := range dlq {
		got[d.MessageId] = fmt.Sprintf("%v/%v", d.Headers[contract.HeaderDeadLetterReason], d.Headers[contract.HeaderAttempt])
	}
	want := map[string]string{}
	for _, m := range msgs {
		want[m.MessageId] = contract.ReasonExhausted + "/2" // the last attempt made
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DLQ: reason/attempt per message (-want +got):\n%s", diff)
	}
	retried, dead := obs.counts()
	if diff := cmp.Diff(map[int]int{2: n / 2}, retried); diff != "" {
		t.Errorf("retries per attempt (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{contract.ReasonExhausted: n}, dead); diff != "" {
		t.Errorf("dead-letters per reason (-want +got):\n%s", diff)
	}
}

// TestRetryExchangeDeleted: the broker refuses the retry publish (404
// closes the publish channel). The original is requeued, never lost, and
// once the exchange is back the helper reopens a channel and goes on.
func TestRetryExchangeDeleted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, topo{layout: "per-attempt", queueType: "classic", delays: []string{"100ms"}}, nil)
	r := newRetrier(t, e)
	ch := e.channel(t)
	if err := ch.ExchangeDelete(contract.RetryExchange(workQueue), false, false); err != nil {
		t.Fatal(err)
	}
	g := newGate()
	rec := e.consume(t, r, 2, func(_ context.Context, d amqp.Delivery) error {
		if n, _ := retry.Attempt(d); n == 1 {
			g.pass()
			return errors.New("first attempt fails")
		}
		return nil
	})
	e.publish(t, amqp.Publishing{MessageId: "f1", Body: []byte("x")})
	// A guard: each requeue waits out the publisher's reopen interval
	// (0.2 s); 0.2 s measured for the two.
	rec.waitFor(t, waitguard.For(time.Second), "two requeues", func(evs []event) bool {
		return count(evs, func(ev event) bool { return ev.outcome == retry.Requeued }) >= 2
	})
	if n := e.depth(t, contract.DeadLetterQueue(workQueue)); n != 0 {
		t.Fatalf("DLQ holds %d messages while the retry exchange is missing", n)
	}
	// The topology comes back exchange first, bindings after: a retry
	// published between the two is returned, which the helper takes for
	// the end of the schedule (seen on a loaded machine). So f1 is held in
	// its handler, no retry of it in flight, while it comes back.
	g.closeAndWait(t)
	brokertest.Declare(t, ch, e.topo) // the operator runs rmqtopo apply
	g.open()
	// A guard: a reopened channel, the 0.1 s retry; 0.3 s measured.
	evs := rec.waitFor(t, waitguard.For(time.Second), "an ack", func(evs []event) bool {
		return count(evs, func(ev event) bool { return ev.outcome == retry.Acked }) > 0
	})
	var got []string
	for _, ev := range evs {
		got = append(got, fmt.Sprintf("%d:%v", ev.attempt, ev.outcome))
		if ev.outcome == retry.Requeued && (ev.err == nil || !strings.Contains(ev.err.Error(), "NOT_FOUND")) {
			t.Errorf("requeue error %v; want the broker's 404", ev.err)
		}
	}
	// Some requeues of attempt 1, one retry, one ack of attempt 2.
	last := got[len(got)-2:]
	if diff := cmp.Diff([]string{"1:retry", "2:ack"}, last); diff != "" || len(got) < 4 {
		t.Errorf("deliveries %v; want requeues of attempt 1, then 1:retry, 2:ack", got)
	}
	// A window: a delivery after the ack would show within it. A busy
	// machine can only make it catch less, never red.
	time.Sleep(200 * time.Millisecond)
	if evs := rec.snapshot(); len(evs) != len(got) {
		t.Errorf("more deliveries after the ack: %s", describe(evs[len(got):]))
	}
}

// gate holds handlers while it is closed.
type gate struct {
	closed  atomic.Bool
	held    chan struct{} // a handler is held
	release chan struct{}
}

func newGate() *gate { return &gate{held: make(chan struct{}, 1), release: make(chan struct{})} }

// pass returns at once while g is open; once closed, it waits until g
// opens again.
func (g *gate) pass() {
	if g.closed.Load() {
		select {
		case g.held <- struct{}{}:
		default:
		}
		<-g.release
	}
}

// closeAndWait closes g and waits until a handler is held.
func (g *gate) closeAndWait(t *testing.T) {
	t.Helper()
	g.closed.Store(true)
	// A guard: a requeue comes round in the publisher's reopen interval
	// (0.2 s measured); 6 s keeps the minute this guard had.
	guard := waitguard.For(6 * time.Second)
	select {
	case <-g.held:
	case <-time.After(guard):
		t.Fatalf("no delivery reached the handler within %v", guard)
	}
}

// open releases every handler g holds, and lets later ones pass.
func (g *gate) open() { close(g.release) }

// TestRetryPublishNacked: the broker nacks the retry (a policy makes its
// wait queue full, overflow reject-publish). Within the confirm timeout
// the helper publishes the copy again, holding the original: once the
// wait queue takes messages again the retry goes through, and attempt 1
// was delivered once. (Requeueing at once looped the original through the
// work queue as fast as the broker nacked, and past a quorum queue's
// delivery limit into the DLQ: the node-loss storm with the helper.) Past
// the confirm timeout the original is requeued.
//
// The copy's publishes are counted (Observer.ConfirmsPending), so the
// test waits for the nack-and-publish-again rounds it needs, not a
// fixed time.
func TestRetryPublishNacked(t *testing.T) {
	t.Parallel()
	failFirst := func(_ context.Context, d amqp.Delivery) error {
		if n, _ := retry.Attempt(d); n == 1 {
			return errors.New("first attempt fails")
		}
		return nil
	}
	setup := func(t *testing.T, opts ...retry.Option) (*env, *recorder, func()) {
		e := newEnv(t, topo{layout: "per-attempt", queueType: "classic", delays: []string{"100ms"}}, nil)
		wait := contract.PerAttemptWaitQueue(workQueue, 1, 100*time.Millisecond)
		mgmt := e.b.Mgmt(t)
		putPolicy(t, mgmt, e.vhost, "full", "^"+regexp.QuoteMeta(wait)+"$",
			rabbithole.PolicyDefinition{"max-length": 0, "overflow": "reject-publish"})
		rec := e.consume(t, newRetrier(t, e, opts...), 1, failFirst)
		e.publish(t, amqp.Publishing{MessageId: "n1", Body: []byte("x")})
		unblock := func() {
			res, err := mgmt.DeletePolicy(e.vhost, "full")
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
		}
		return e, rec, unblock
	}
	acked := func(evs []event) bool {
		return count(evs, func(ev event) bool { return ev.outcome == retry.Acked }) > 0
	}

	t.Run("published again", func(t *testing.T) {
		pubs := newPublishes()
		// The confirm timeout is a guard here (past it the original would
		// be requeued): the copy goes through at its first publish after
		// the unblock, about 0.7 s after its first (pauses of 0.1, 0.2 and
		// 0.4 s).
		_, rec, unblock := setup(t, retry.WithObserver(pubs), retry.WithConfirmTimeout(waitguard.For(time.Second)))
		// Published, nacked, published again after 0.1 s, nacked, again
		// after 0.2 s: a guard around the 0.3 s of pauses.
		pubs.waitFor(t, waitguard.For(time.Second), 3)
		if evs := rec.snapshot(); len(evs) != 0 {
			t.Fatalf("settled while the wait queue refuses the copy: %s; want the handler still settling", describe(evs))
		}
		unblock()
		// A guard: the next publish comes after a 0.4 s pause.
		evs := rec.waitFor(t, waitguard.For(time.Second), "an ack", acked)
		if len(evs) != 2 || evs[0].outcome != retry.Retried || evs[0].attempt != 1 || evs[1].attempt != 2 {
			t.Errorf("deliveries: %s; want attempt 1 retried once, no requeue, then attempt 2 acked", describe(evs))
		}
	})
	t.Run("requeued past the confirm timeout", func(t *testing.T) {
		_, rec, unblock := setup(t, retry.WithConfirmTimeout(500*time.Millisecond))
		// Guards: two confirm timeouts (0.5 s each) and the redeliveries
		// (1.0 s measured); then at most one more and the 0.1 s retry
		// (0.2 s measured).
		rec.waitFor(t, waitguard.For(2*time.Second), "two requeues", func(evs []event) bool {
			return count(evs, func(ev event) bool { return ev.outcome == retry.Requeued }) >= 2
		})
		unblock()
		evs := rec.waitFor(t, waitguard.For(time.Second), "an ack", acked)
		for _, ev := range evs {
			if ev.outcome == retry.Requeued && !refusedInTime(ev.err) {
				t.Errorf("requeue error %v; want a nack, or the confirm timeout while the broker answered a copy", ev.err)
			}
			// Never before the confirm timeout: a floor, which a busy
			// machine cannot break.
			if ev.outcome == retry.Requeued && ev.settled.Sub(ev.at) < 400*time.Millisecond {
				t.Errorf("requeued %v after its delivery; want the copy published again for the confirm timeout, 500ms", ev.settled.Sub(ev.at))
			}
		}
		if last := evs[len(evs)-1]; last.attempt != 2 || count(evs, func(ev event) bool { return ev.outcome == retry.Retried }) != 1 {
			t.Errorf("deliveries: %s; want requeues, one retry, an ack of attempt 2", describe(evs))
		}
	})
}

// publishes records when a Retrier published a copy (ConfirmsPending's
// +1, once for each publish).
type publishes struct {
	retry.NopObserver
	mu     sync.Mutex
	at     []time.Time
	notify chan struct{}
}

func newPublishes() *publishes { return &publishes{notify: make(chan struct{}, 1)} }

func (p *publishes) ConfirmsPending(_ string, delta int) {
	if delta <= 0 {
		return
	}
	p.mu.Lock()
	p.at = append(p.at, time.Now())
	p.mu.Unlock()
	select {
	case p.notify <- struct{}{}:
	default:
	}
}

func (p *publishes) snapshot() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Time(nil), p.at...)
}

// waitFor waits until n publishes were made.
func (p *publishes) waitFor(tb testing.TB, timeout time.Duration, n int) {
	tb.Helper()
	waitUntil(tb, timeout, fmt.Sprintf("%d publishes", n), p.notify, p.snapshot,
		func(at []time.Time) bool { return len(at) >= n },
		func(at []time.Time) string { return fmt.Sprint(at) })
}

// refusedInTime says whether err is the requeue error of a copy the broker
// did not take within the confirm timeout. The timeout ends the copy's
// nack-and-publish-again loop in a pause (the nack is the error) or, on a
// loaded machine, while the broker's answer to the last copy is on its
// way (the wait for it is).
func refusedInTime(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "nacked") ||
		strings.Contains(err.Error(), "waiting for the broker's confirmation: context deadline exceeded"))
}

func putPolicy(t *testing.T, c *rabbithole.Client, vhost, name, pattern string, def rabbithole.PolicyDefinition) {
	t.Helper()
	res, err := c.PutPolicy(vhost, name, rabbithole.Policy{Pattern: pattern, ApplyTo: "queues", Priority: 10, Definition: def})
	if err != nil {
		t.Fatalf("policy %s: %v", name, err)
	}
	res.Body.Close()
	// Policies apply asynchronously; give the queue a moment.
	time.Sleep(300 * time.Millisecond)
}
