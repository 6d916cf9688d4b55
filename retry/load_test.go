package retry_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/retry"
)

// TestThousandMessages pushes 1,000 messages with random failures through 4
// concurrent handlers. Each (message, attempt) draws success, failure or
// permanent rejection from a seeded generator, so the test knows the end
// of every message in advance: acked once, or in the DLQ once, with the
// right reason, and the observer's counts to the unit.
func TestThousandMessages(t *testing.T) {
	t.Parallel()
	const (
		n        = 1000
		handlers = 4
		attempts = 4 // the first, 1 immediate retry, 2 delayed
	)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	decide := func(id string, attempt int) string {
		var k uint64
		fmt.Sscanf(id, "m%d", &k)
		rng := rand.New(rand.NewPCG(seed, k<<16|uint64(attempt)))
		switch p := rng.Float64(); {
		case p < 0.05:
			return "reject"
		case p < 0.45:
			return "fail"
		}
		return "ok"
	}
	want := map[string]string{}
	wantRetried := map[int]int{}
	wantDead := map[string]int{}
	for i := range n {
		id := fmt.Sprintf("m%04d", i)
	tries:
		for a := 1; ; a++ {
			switch v := decide(id, a); {
			case v == "ok":
				want[id] = "ack"
				break tries
			case v == "reject":
				want[id] = "dlq:" + contract.ReasonRejected
				wantDead[contract.ReasonRejected]++
				break tries
			case a == attempts:
				want[id] = "dlq:" + contract.ReasonExhausted // returned by the retry exchange
				wantDead[contract.ReasonExhausted]++
				break tries
			default:
				wantRetried[a+1]++
			}
		}
	}

	e := newEnv(t, topo{layout: "shared", queueType: "quorum", immediate: 1, delays: []string{"100ms", "200ms"}}, nil)
	obs := newCounter()
	r := newRetrier(t, e, retry.WithObserver(obs), retry.WithLogger(discardLogger()))
	rec := e.consume(t, r, handlers, func(_ context.Context, d amqp.Delivery) error {
		a, _ := retry.Attempt(d)
		switch decide(d.MessageId, a) {
		case "reject":
			return retry.Permanent(errors.New("random reject"))
		case "fail":
			return errors.New("random failure")
		}
		return nil
	})
	msgs := make([]amqp.Publishing, n)
	for i := range msgs {
		msgs[i] = amqp.Publishing{MessageId: fmt.Sprintf("m%04d", i), DeliveryMode: amqp.Persistent, Body: []byte("payload")}
	}
	start := time.Now()
	e.publishMany(t, bizExchange, bizKey, msgs)

	wantDLQ := 0
	for _, v := range want {
		if v != "ack" {
			wantDLQ++
		}
	}
	// It settles in about 1 s (0.8 s measured in make test); 30 s was not
	// enough once, in make test beside two CPU-bound loops, so 12 s keeps
	// the 2 minutes this guard had. The bound only stops a hung test.
	settle := waitguard.For(12 * time.Second)
	dlq := brokertest.Drain(t, e.conn, contract.DeadLetterQueue(workQueue), wantDLQ, settle)
	evs := rec.waitFor(t, settle, "every ack", func(evs []event) bool {
		return count(evs, func(ev event) bool { return ev.outcome == retry.Acked }) >= n-wantDLQ
	})
	t.Logf("%d messages, %d deliveries, settled in %v", n, len(evs), time.Since(start).Round(time.Millisecond))
	// A window: stragglers (duplicates) would show by now. A busy machine
	// can only make it catch fewer, never red.
	time.Sleep(300 * time.Millisecond)

	got := map[string]string{}
	seen := map[string]int{}
	note := func(id, final string) {
		seen[id]++
		got[id] = final
	}
	for _, ev := range rec.snapshot() {
		if ev.err != nil || ev.outcome == retry.Requeued {
			t.Errorf("%s attempt %d: %v %v", ev.messageID, ev.attempt, ev.outcome, ev.err)
		}
		if ev.outcome == retry.Acked {
			note(ev.messageID, "ack")
		}
	}
	for _, d := range dlq {
		reason, _ := d.Headers[contract.HeaderDeadLetterReason].(string)
		if reason == contract.ReasonExhausted && d.Headers[contract.HeaderAttempt] != contract.AttemptValue(attempts) {
			t.Errorf("%s exhausted with attempt %v", d.MessageId, d.Headers[contract.HeaderAttempt])
		}
		note(d.MessageId, "dlq:"+reason)
	}
	for id, k := range seen {
		if k != 1 {
			t.Errorf("%s ended %d times", id, k)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("final state per message (-want +got):\n%s", diff)
	}
	retried, dead := obs.counts()
	if diff := cmp.Diff(wantRetried, retried); diff != "" {
		t.Errorf("Observer.Retried per attempt (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantDead, dead); diff != "" {
		t.Errorf("Observer.DeadLettered per reason (-want +got):\n%s", diff)
	}
	if d := e.depth(t, workQueue); d != 0 {
		t.Errorf("work queue holds %d", d)
	}
}
