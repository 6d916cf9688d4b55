package retry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
)

// TestDecide checks the settle decision of every kind of handler result
// and delivery, without a broker: the move, where a copy goes and the
// headers it carries.
func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	ladder, err := contract.NewLadder(100*time.Millisecond, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	key := func(d time.Duration) string { k, _ := ladder.RoutingKey(d, "q"); return k }
	plain := exchangeRoute{queue: "q"}
	withReturn := exchangeRoute{queue: "q", back: "q.return"}
	withLevels := exchangeRoute{queue: "q", levels: &levels{ladder: ladder, backoff: Linear(time.Second)}}
	failed := errors.New("boom")
	at := func(v any) amqp.Table { return amqp.Table{contract.HeaderAttempt: v} }

	cases := []struct {
		name      string
		rt        route
		headers   amqp.Table
		herr      error
		cancelled bool
		want      decision // msg and cause not compared
		attemptH  any      // the copy's attempt header; nil for none expected
	}{
		{"ack", plain, nil, nil, false, decision{move: moveAck, attempt: 1}, nil},
		{"shutdown requeues unchanged", plain, at("3"), context.Canceled, true, decision{move: moveRequeue, attempt: 3}, nil},
		{"a deadline retries", plain, nil, context.DeadlineExceeded, false,
			decision{move: moveRetry, exchange: "q.retry", key: "q", attempt: 1, next: 2}, "2"},
		{"permanent", plain, at("2"), Permanent(failed), false,
			decision{move: moveDeadLetter, exchange: "q.dlx", key: "q", attempt: 2, reason: contract.ReasonRejected}, "2"},
		{"wrapped ErrReject", plain, nil, fmt.Errorf("bad: %w", ErrReject), false,
			decision{move: moveDeadLetter, exchange: "q.dlx", key: "q", attempt: 1, reason: contract.ReasonRejected}, nil},
		{"first failure", plain, nil, failed, false,
			decision{move: moveRetry, exchange: "q.retry", key: "q", attempt: 1, next: 2}, "2"},
		{"integer attempt header", plain, at(int32(4)), failed, false,
			decision{move: moveRetry, exchange: "q.retry", key: "q", attempt: 4, next: 5}, "5"},
		{"return queue", withReturn, at("2"), failed, false,
			decision{move: moveRetry, exchange: "q.retry", key: "q.return", attempt: 2, next: 3}, "3"},
		{"levels: the backoff's delay", withLevels, at("2"), failed, false,
			decision{move: moveRetry, exchange: "q.retry", key: key(2 * time.Second), attempt: 2, next: 3}, "3"},
		{"levels: RetryAfter", withLevels, nil, RetryAfter(1500 * time.Millisecond), false,
			decision{move: moveRetry, exchange: "q.retry", key: key(1500 * time.Millisecond), attempt: 1, next: 2}, "2"},
		{"levels: RetryAfter beyond the ladder", withLevels, nil, RetryAfter(time.Hour), false,
			decision{move: moveRetry, exchange: "q.retry", key: key(ladder.MaxDelay()), attempt: 1, next: 2}, "2"},
		{"malformed attempt", plain, at("two"), failed, false,
			decision{move: moveDeadLetter, exchange: "q.dlx", key: "q", reason: ReasonMalformedAttempt}, "two"},
		{"at the last attempt", plain, at(fmt.Sprint(contract.MaxAttempt)), failed, false,
			decision{move: moveDeadLetter, exchange: "q.dlx", key: "q", attempt: contract.MaxAttempt, reason: contract.ReasonExhausted}, fmt.Sprint(contract.MaxAttempt)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := amqp.Table{"trace": "t1", "x-death": []any{}, contract.HeaderDeadLetterReason: "old"}
			for k, v := range c.headers {
				h[k] = v
			}
			d := amqp.Delivery{Headers: h, MessageId: "m", Exchange: "biz", RoutingKey: "k"}
			got := c.rt.decide(&d, c.herr, c.cancelled, now)
			if !sameDecision(got, c.want) {
				t.Fatalf("decision %+v; want %+v", got, c.want)
			}
			if got.move == moveAck || got.move == moveRequeue {
				if got.msg.Headers != nil {
					t.Errorf("a %v decision carries a copy", got.move)
				}
				return
			}
			checkCopy(t, got, c.attemptH, now)
		})
	}
}

// sameDecision compares decisions but for the copy and the cause.
func sameDecision(a, b decision) bool {
	return a.move == b.move && a.exchange == b.exchange && a.key == b.key &&
		a.attempt == b.attempt && a.next == b.next && a.reason == b.reason
}

// checkCopy checks the headers of a decision's copy.
func checkCopy(t *testing.T, got decision, attempt any, now time.Time) {
	t.Helper()
	hs := got.msg.Headers
	if hs[contract.HeaderAttempt] != attempt {
		t.Errorf("copy's attempt header %v; want %v", hs[contract.HeaderAttempt], attempt)
	}
	if hs["trace"] != "t1" || hs["x-death"] != nil {
		t.Errorf("copy's headers %v: want other headers kept and x-death dropped", hs)
	}
	if got.move == moveRetry && hs[contract.HeaderDeadLetterReason] != nil {
		t.Errorf("a retry copy keeps the stale reason %v", hs[contract.HeaderDeadLetterReason])
	}
	// A retry comes back ahead of a 4.0+ quorum queue's backlog; a DLQ
	// copy keeps the message's own priority (0 here).
	if want := map[move]uint8{moveRetry: contract.RetryPriority}[got.move]; got.msg.Priority != want {
		t.Errorf("a %v copy's priority %d; want %d", got.move, got.msg.Priority, want)
	}
	if got.move == moveDeadLetter && hs[contract.HeaderDeadLetterReason] != got.reason {
		t.Errorf("a DLQ copy's reason header %v; want %q", hs[contract.HeaderDeadLetterReason], got.reason)
	}
	if hs[contract.HeaderFirstFailure] != now.Format(time.RFC3339Nano) || hs[contract.HeaderOriginalExchange] != "biz" {
		t.Errorf("copy's failure headers %v", hs)
	}
	if got.msg.MessageId != "m" || hs[contract.HeaderLastError] == "" {
		t.Errorf("copy %+v: want the message id and a last error", got.msg)
	}
}

// TestDecideExhausted: after the retry exchange returned a retry copy, the
// delivery goes to the DLQ as exhausted with its own attempt.
func TestDecideExhausted(t *testing.T) {
	rt := exchangeRoute{queue: "q", back: "q.return"}
	d := amqp.Delivery{Headers: amqp.Table{contract.HeaderAttempt: "3"}}
	got := rt.exhausted(&d, errors.New("boom"), time.Now())
	if got.move != moveDeadLetter || got.exchange != "q.dlx" || got.key != "q" || got.reason != contract.ReasonExhausted || got.attempt != 3 {
		t.Fatalf("exhausted: %+v", got)
	}
	if got.msg.Headers[contract.HeaderAttempt] != "3" {
		t.Errorf("the DLQ copy's attempt %v; want the delivery's own, 3", got.msg.Headers[contract.HeaderAttempt])
	}
}

// TestDecideNative checks the settle decision on a native queue, which
// delays retries inside itself: the broker's delivery count numbers the
// attempts, a schedule the broker expresses rejects, any other is held
// until its time over AMQP 1.0, and the last attempt and a permanent
// failure go to the DLQ at once.
func TestDecideNative(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	s := time.Second
	linear := contract.Native{Route: contract.RouteReject, Delays: []time.Duration{s, 2 * s, 3 * s, 3 * s}, DeliveryLimit: 4}
	expo := contract.Native{Route: contract.RouteModified, Delays: []time.Duration{s, 2 * s, 4 * s}, DeliveryLimit: 3}
	jittered := expo
	jittered.Jitter = true
	half := func(d time.Duration) time.Duration { return d / 2 }
	count := func(n any) amqp.Table { return amqp.Table{contract.HeaderDeliveryCount: n} }
	failed := errors.New("boom")
	cases := []struct {
		name    string
		native  contract.Native
		headers amqp.Table
		herr    error
		want    decision
	}{
		{"ack", linear, nil, nil, decision{move: moveAck, attempt: 1}},
		{"shutdown", expo, count(int64(1)), context.Canceled, decision{move: moveRequeue, attempt: 2}},
		{"linear: first failure rejects", linear, nil, failed, decision{move: moveReject, attempt: 1, next: 2}},
		{"linear: a RetryAfter takes the queue's delay", linear, count(int64(2)), RetryAfter(time.Minute), decision{move: moveReject, attempt: 3, next: 4}},
		{"linear: the last attempt is exhausted", linear, count(int64(4)), failed,
			decision{move: moveDeadLetter, exchange: "q.dlx", key: "q", attempt: 5, reason: contract.ReasonExhausted}},
		{"modified: the schedule's delay", expo, count(int32(1)), failed,
			decision{move: moveModify, attempt: 2, next: 3, deliverAt: now.Add(2 * s)}},
		{"modified: RetryAfter", expo, nil, RetryAfter(1500 * time.Millisecond),
			decision{move: moveModify, attempt: 1, next: 2, deliverAt: now.Add(1500 * time.Millisecond)}},
		{"modified: jitter", jittered, count(int64(2)), failed,
			decision{move: moveModify, attempt: 3, next: 4, deliverAt: now.Add(2 * s)}},
		{"modified: exhausted", expo, count(int64(3)), failed,
			decision{move: moveDeadLetter, exchange: "q.dlx", key: "q", attempt: 4, reason: contract.ReasonExhausted}},
		{"permanent at once", expo, nil, Permanent(failed),
			decision{move: moveDeadLetter, exchange: "q.dlx", key: "q", attempt: 1, reason: contract.ReasonRejected}},
		// A message moved here from a broker where it had retried
		// (rmqtopo upgrade move) goes on at its attempt number.
		{"a moved retry goes on at its attempt", expo, amqp.Table{contract.HeaderAttempt: "2"}, failed,
			decision{move: moveModify, attempt: 2, next: 3, deliverAt: now.Add(2 * s)}},
		{"a moved retry counts its deliveries here", expo, amqp.Table{contract.HeaderAttempt: "3", contract.HeaderDeliveryCount: int64(1)}, failed,
			decision{move: moveDeadLetter, exchange: "q.dlx", key: "q", attempt: 4, reason: contract.ReasonExhausted}},
		{"a moved retry past the schedule is exhausted", linear, amqp.Table{contract.HeaderAttempt: "7"}, failed,
			decision{move: moveDeadLetter, exchange: "q.dlx", key: "q", attempt: 7, reason: contract.ReasonExhausted}},
		{"a malformed attempt header reads as none", linear, amqp.Table{contract.HeaderAttempt: "x"}, failed,
			decision{move: moveReject, attempt: 1, next: 2}},
		// A count that came with the message, not redelivered (a
		// shovel copies another broker's), is not this queue's.
		{"copied: a count not redelivered is not this queue's", expo, count(int64(1)), failed,
			decision{move: moveModify, attempt: 1, next: 2, deliverAt: now.Add(s)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := c.native
			rt := nativeRoute{queue: "q", schedule: &n, draw: half}
			h := amqp.Table{"trace": "t1"}
			for k, v := range c.headers {
				h[k] = v
			}
			_, counted := h[contract.HeaderDeliveryCount]
			d := amqp.Delivery{Headers: h, MessageId: "m", Exchange: "biz", Redelivered: counted && !strings.HasPrefix(c.name, "copied:")}
			got := rt.decide(&d, c.herr, errors.Is(c.herr, context.Canceled), now)
			if !sameDecision(got, c.want) || !got.deliverAt.Equal(c.want.deliverAt) {
				t.Fatalf("decision %+v; want %+v", got, c.want)
			}
			if got.move != moveDeadLetter {
				return
			}
			checkCopy(t, got, contract.AttemptValue(c.want.attempt), now)
			if _, ok := got.msg.Headers[contract.HeaderDeliveryCount]; ok {
				t.Error("the DLQ copy keeps the broker's delivery count")
			}
		})
	}
}

// TestNativeRouteOwnMoves: Retrier.Retry and Reject on a native queue
// take the native route's moves. While the route was one struct whose
// native part was a field, they took the retry exchange's, which a native
// queue does not have (a retry published to "q.retry" and requeued when
// the broker closed the channel), and a rejected copy went out without
// its attempt.
func TestNativeRouteOwnMoves(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	linear := contract.Native{Route: contract.RouteReject, Delays: []time.Duration{time.Second, 2 * time.Second}, DeliveryLimit: 2}
	var rt route = nativeRoute{queue: "q", schedule: &linear}
	d := amqp.Delivery{Headers: amqp.Table{contract.HeaderDeliveryCount: int64(1)}, MessageId: "m", Redelivered: true}
	if got := rt.retry(&d, errors.New("boom"), now); got.move != moveReject || got.attempt != 2 || got.next != 3 {
		t.Errorf("Retry: %+v, want a reject for attempt 3", got)
	}
	got := rt.deadLetter(&d, errors.New("boom"), contract.ReasonRejected, now)
	if got.move != moveDeadLetter || got.exchange != "q.dlx" || got.msg.Headers[contract.HeaderAttempt] != "2" {
		t.Errorf("Reject: %+v, want a copy to q.dlx with attempt 2", got)
	}
	d.Headers[contract.HeaderDeliveryCount] = int64(2)
	if got := rt.retry(&d, errors.New("boom"), now); got.move != moveDeadLetter || got.reason != contract.ReasonExhausted {
		t.Errorf("Retry past the schedule: %+v, want the DLQ, exhausted", got)
	}
}

// TestUnhonoured checks which routes cannot honour a handler's
// RetryAfter, as spec.TravelOf tells the user ahead: wait queues (with
// or without a return queue) and a native queue's reject route; the
// ladder only beyond its maximum; a native queue's AMQP 1.0 route always.
func TestUnhonoured(t *testing.T) {
	now := time.Now()
	ladder, err := contract.NewLadder(100*time.Millisecond, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s := time.Second
	linear := contract.Native{Route: contract.RouteReject, Delays: []time.Duration{s, 2 * s}, DeliveryLimit: 2}
	expo := contract.Native{Route: contract.RouteModified, Delays: []time.Duration{s, 4 * s}, DeliveryLimit: 2}
	withLevels := exchangeRoute{queue: "q", levels: &levels{ladder: ladder, backoff: Linear(s)}}
	count := func(n int64) amqp.Table { return amqp.Table{contract.HeaderDeliveryCount: n} }
	cases := []struct {
		name    string
		rt      route
		headers amqp.Table
		herr    error
		want    string // in the reason; "" for none
	}{
		{"wait queue", exchangeRoute{queue: "q"}, nil, RetryAfter(2 * s), "wait queue, whose TTL"},
		{"return queue", exchangeRoute{queue: "q", back: "q.return"}, nil, RetryAfter(2 * s), "wait queue, whose TTL"},
		{"wrapped, with a cause", exchangeRoute{queue: "q"}, nil, fmt.Errorf("429: %w", &DelayError{Delay: s, Err: errors.New("busy")}), "wait queue"},
		{"no RetryAfter", exchangeRoute{queue: "q"}, nil, errors.New("boom"), ""},
		{"levels", withLevels, nil, RetryAfter(2 * s), ""},
		{"levels beyond the ladder", withLevels, nil, RetryAfter(time.Hour), "maximum, " + ladder.MaxDelay().String()},
		{"native reject", nativeRoute{queue: "q", schedule: &linear}, count(1), RetryAfter(time.Minute), "its own delay applies (2s before attempt 3)"},
		{"native reject, exhausted", nativeRoute{queue: "q", schedule: &linear}, count(2), RetryAfter(time.Minute), ""},
		{"native modified", nativeRoute{queue: "q", schedule: &expo}, nil, RetryAfter(time.Minute), ""},
		{"permanent", exchangeRoute{queue: "q"}, nil, Permanent(RetryAfter(s)), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, counted := c.headers[contract.HeaderDeliveryCount]
			d := amqp.Delivery{Headers: c.headers, Redelivered: counted} // a quorum queue's count comes with redelivered
			got := c.rt.unhonoured(c.rt.decide(&d, c.herr, false, now))
			if (got == "") != (c.want == "") || !strings.Contains(got, c.want) {
				t.Errorf("unhonoured = %q; want %q in it", got, c.want)
			}
		})
	}
}

// TestRetryAfterWarnedOnce: a RetryAfter the queue cannot honour is
// logged once, not per message, and not again by the Retrier of the next
// connection of the same Consume (which shares its options); each retry
// still goes back to the queue.
func TestRetryAfterWarnedOnce(t *testing.T) {
	var logs bytes.Buffer
	o := newOptions([]Option{WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))})
	linear := contract.Native{Route: contract.RouteReject, Delays: []time.Duration{time.Second, 2 * time.Second}, DeliveryLimit: 2}
	retrier := func() *Retrier {
		r := &Retrier{route: nativeRoute{queue: "q", schedule: &linear}, log: o.log.With("queue", "q"), now: time.Now, warned: o.warned}
		r.schedule.Store(&linear)
		return r
	}
	acks := &countingAck{}
	for i, r := range []*Retrier{retrier(), retrier(), retrier()} {
		for j := range 2 {
			d := amqp.Delivery{Acknowledger: acks, MessageId: fmt.Sprint(i, j)}
			if out, err := r.Settle(context.Background(), d, RetryAfter(time.Minute)); out != Retried || err != nil {
				t.Fatalf("settle: %v, %v; want Retried", out, err)
			}
		}
	}
	if acks.rejects != 6 {
		t.Errorf("%d deliveries rejected back to the queue; want 6", acks.rejects)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Fatalf("%d warnings; want 1:\n%s", n, logs.String())
	}
	for _, want := range []string{"queue=q", "requested=1m0s", "its own delay applies (1s before attempt 2)"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the warning lacks %q:\n%s", want, logs.String())
		}
	}
}

// countingAck is a delivery's acknowledger that counts the rejects with
// requeue: a native queue's retries.
type countingAck struct{ rejects int }

func (a *countingAck) Ack(uint64, bool) error        { return nil }
func (a *countingAck) Nack(uint64, bool, bool) error { return nil }
func (a *countingAck) Reject(_ uint64, requeue bool) error {
	if requeue {
		a.rejects++
	}
	return nil
}
