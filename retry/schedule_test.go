package retry_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/retry"
)

// timerSlack is how early a retry may seem to arrive: RabbitMQ's TTL timers
// have millisecond resolution.
const timerSlack = 2 * time.Millisecond

// TestSchedule fails one message every time and checks that each retry
// arrives after its scheduled delay, never before (how late is a timing
// goal, measured by BenchmarkReturnLateness), and that after
// the last retry the message is in the DLQ with every original property
// and header plus the retry headers.
func TestSchedule(t *testing.T) {
	t.Parallel()
	delays := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}
	for _, tc := range []struct {
		name string
		topo topo
	}{
		{"per-attempt/quorum", topo{layout: "per-attempt", queueType: "quorum", delays: []string{"100ms", "200ms", "400ms"}}},
		{"shared/classic", topo{layout: "shared", queueType: "classic", waitType: "classic", delays: []string{"100ms", "200ms", "400ms"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.topo, nil)
			obs := newCounter()
			r := newRetrier(t, e, retry.WithObserver(obs))
			rec := e.consume(t, r, 1, func(_ context.Context, d amqp.Delivery) error {
				n, _ := retry.Attempt(d)
				return fmt.Errorf("boom %d", n)
			})
			sent := time.Now()
			orig := amqp.Publishing{
				ContentType:     "application/json",
				ContentEncoding: "identity",
				DeliveryMode:    amqp.Persistent,
				Priority:        3,
				CorrelationId:   "corr-1",
				ReplyTo:         "replies",
				MessageId:       "msg-1",
				Timestamp:       time.Unix(1700000000, 0),
				Type:            "order.created",
				AppId:           "shop",
				Headers: amqp.Table{
					"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
					"outbox-id":   int64(42),
					"x-custom":    "kept",
					"nested":      amqp.Table{"a": "b"},
				},
				Body: []byte(`{"order":1}`),
			}
			e.publish(t, orig)

			// A guard: the delays, 0.1+0.2+0.4 s (0.71 s measured).
			evs := rec.waitFor(t, waitguard.For(time.Second), "four deliveries", func(evs []event) bool { return len(evs) >= 4 })
			var attempts []int
			for i, ev := range evs {
				attempts = append(attempts, ev.attempt)
				want := retry.Retried
				if i == 3 {
					want = retry.DeadLettered // the retry exchange returned attempt 5
				}
				if ev.outcome != want || ev.err != nil {
					t.Errorf("attempt %d: outcome %v, %v; want %v", ev.attempt, ev.outcome, ev.err, want)
				}
			}
			if diff := cmp.Diff([]int{1, 2, 3, 4}, attempts); diff != "" {
				t.Fatalf("attempts (-want +got):\n%s", diff)
			}
			for k := 1; k < len(evs); k++ {
				gap := evs[k].at.Sub(evs[k-1].at)
				late := gap - delays[k-1]
				t.Logf("retry %d: scheduled %v, arrived after %v (late %v)", k, delays[k-1], gap.Round(time.Millisecond), late.Round(time.Millisecond))
				if gap < delays[k-1]-timerSlack {
					t.Errorf("retry %d arrived %v after the failure, before its delay of %v", k, gap, delays[k-1])
				}
			}

			// The DLQ copy was confirmed before the last delivery
			// settled: it is there, and read in milliseconds.
			dl := brokertest.Drain(t, e.conn, contract.DeadLetterQueue(workQueue), 1, waitguard.For(100*time.Millisecond))[0]
			got := dl.Headers
			ff, _ := got[contract.HeaderFirstFailure].(string)
			at, err := time.Parse(time.RFC3339Nano, ff)
			if err != nil || at.Before(sent.Add(-time.Second)) || at.After(evs[0].settled.Add(time.Second)) {
				t.Errorf("first failure %q (%v); want the time of the first failure, near %v", ff, err, evs[0].at)
			}
			delete(got, contract.HeaderFirstFailure)
			wantHeaders := amqp.Table{
				"traceparent":                     orig.Headers["traceparent"],
				"outbox-id":                       int64(42),
				"x-custom":                        "kept",
				"nested":                          amqp.Table{"a": "b"},
				contract.HeaderAttempt:            "4", // the last attempt made
				contract.HeaderDeadLetterReason:   contract.ReasonExhausted,
				contract.HeaderLastError:          "boom 4",
				contract.HeaderOriginalExchange:   bizExchange,
				contract.HeaderOriginalRoutingKey: bizKey,
			}
			if diff := cmp.Diff(wantHeaders, got); diff != "" {
				t.Errorf("DLQ headers (-want +got):\n%s", diff)
			}
			wantProps := orig
			wantProps.Headers = nil
			// Its last attempt was a retry, raised to the retry priority.
			wantProps.Priority = contract.RetryPriority
			gotProps := amqp.Publishing{
				ContentType: dl.ContentType, ContentEncoding: dl.ContentEncoding, DeliveryMode: dl.DeliveryMode,
				Priority: dl.Priority, CorrelationId: dl.CorrelationId, ReplyTo: dl.ReplyTo, MessageId: dl.MessageId,
				Timestamp: dl.Timestamp.In(orig.Timestamp.Location()), Type: dl.Type, AppId: dl.AppId, Body: dl.Body,
			}
			if diff := cmp.Diff(wantProps, gotProps); diff != "" {
				t.Errorf("DLQ message properties (-want +got):\n%s", diff)
			}

			retried, dead := obs.counts()
			if diff := cmp.Diff(map[int]int{2: 1, 3: 1, 4: 1}, retried); diff != "" {
				t.Errorf("Observer.Retried counts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[string]int{contract.ReasonExhausted: 1}, dead); diff != "" {
				t.Errorf("Observer.DeadLettered counts (-want +got):\n%s", diff)
			}
			for _, q := range e.topo.Queues {
				if q.Name == contract.DeadLetterQueue(workQueue) {
					continue
				}
				if n := e.depth(t, q.Name); n != 0 {
					t.Errorf("queue %q holds %d messages, want 0", q.Name, n)
				}
			}
		})
	}
}

// TestRejectGoesToDLQAtOnce: a permanent error skips the schedule. The
// first delay is an hour and the DLQ is read for no longer than its guard
// (30 s unless scaled): a message that waited in the schedule would not be
// there; no clock is compared.
func TestRejectGoesToDLQAtOnce(t *testing.T) {
	t.Parallel()
	const firstDelay = time.Hour
	e := newEnv(t, topo{layout: "per-attempt", queueType: "classic", delays: []string{"1h"}}, nil)
	obs := newCounter()
	r := newRetrier(t, e, retry.WithObserver(obs))
	rec := e.consume(t, r, 1, func(context.Context, amqp.Delivery) error {
		return fmt.Errorf("order 7: %w", retry.ErrReject)
	})
	e.publish(t, amqp.Publishing{MessageId: "r1", Headers: amqp.Table{"traceparent": "t1"}, Body: []byte("x")})
	// A guard: the copy is in the DLQ within milliseconds (2 ms measured).
	dl := brokertest.Drain(t, e.conn, contract.DeadLetterQueue(workQueue), 1, waitguard.For(100*time.Millisecond))[0]
	// The DLQ may show the message before the helper records its outcome,
	// which it does once the delivery is acked, right after.
	evs := rec.waitFor(t, waitguard.For(100*time.Millisecond), "the delivery settled", func(evs []event) bool { return len(evs) > 0 })
	// A window: a second delivery would show by now. A busy machine can
	// only make it catch less, never red.
	time.Sleep(200 * time.Millisecond)
	evs = rec.snapshot()
	if len(evs) != 1 || evs[0].outcome != retry.DeadLettered || evs[0].err != nil {
		t.Fatalf("deliveries: %s; want one, dead-lettered", describe(evs))
	}
	h := dl.Headers
	for name, want := range map[string]any{
		contract.HeaderDeadLetterReason:   contract.ReasonRejected,
		contract.HeaderLastError:          "order 7: permanent failure",
		contract.HeaderOriginalExchange:   bizExchange,
		contract.HeaderOriginalRoutingKey: bizKey,
		"traceparent":                     "t1",
	} {
		if h[name] != want {
			t.Errorf("header %s = %#v, want %#v", name, h[name], want)
		}
	}
	if _, ok := h[contract.HeaderAttempt]; ok {
		t.Errorf("a rejected first delivery carries %s=%v; want none", contract.HeaderAttempt, h[contract.HeaderAttempt])
	}
	if _, dead := obs.counts(); !cmp.Equal(dead, map[string]int{contract.ReasonRejected: 1}) {
		t.Errorf("Observer.DeadLettered counts %v, want rejected: 1", dead)
	}
	// No retry was scheduled: the wait queue is empty.
	if n := e.depth(t, contract.PerAttemptWaitQueue(workQueue, 1, firstDelay)); n != 0 {
		t.Errorf("the wait queue holds %d messages after a reject", n)
	}
}

// TestPanicIsRetried: a panicking handler is an ordinary failure.
func TestPanicIsRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t, topo{layout: "shared", queueType: "classic", waitType: "classic", delays: []string{"100ms"}}, nil)
	r := newRetrier(t, e)
	rec := e.consume(t, r, 2, func(_ context.Context, d amqp.Delivery) error {
		if n, _ := retry.Attempt(d); n == 1 {
			var m map[string]int
			m["boom"]++ // nil map write: a runtime panic
		}
		return nil
	})
	e.publish(t, amqp.Publishing{MessageId: "p1", Body: []byte("x")})
	// A guard: a 0.1 s retry (0.1 s measured).
	evs := rec.waitFor(t, waitguard.For(time.Second), "an ack", func(evs []event) bool {
		return count(evs, func(ev event) bool { return ev.outcome == retry.Acked }) > 0
	})
	if len(evs) != 2 || evs[0].outcome != retry.Retried || evs[1].attempt != 2 {
		t.Fatalf("deliveries: %s; want a retry, then an ack of attempt 2", describe(evs))
	}
	if msg, _ := evs[1].headers[contract.HeaderLastError].(string); !strings.Contains(msg, "handler panicked") {
		t.Errorf("last error %q; want the panic", msg)
	}
}

// TestPermanent checks the error classification.
func TestPermanent(t *testing.T) {
	base := errors.New("bad payload")
	p := retry.Permanent(base)
	if !errors.Is(p, retry.ErrReject) || !errors.Is(p, base) || p.Error() != "bad payload" {
		t.Errorf("Permanent(%v) = %v: Is(ErrReject)=%v Is(base)=%v", base, p, errors.Is(p, retry.ErrReject), errors.Is(p, base))
	}
	if errors.Is(base, retry.ErrReject) {
		t.Error("an ordinary error is permanent")
	}
	if retry.Permanent(nil) != nil {
		t.Error("Permanent(nil) != nil")
	}
	if w := fmt.Errorf("ctx: %w", p); !errors.Is(w, retry.ErrReject) {
		t.Error("a wrapped permanent error is not permanent")
	}
}
