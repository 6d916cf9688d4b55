package retry

import (
	"context"
	"errors"
	"fmt"
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
	plain := route{queue: "q"}
	withReturn := route{queue: "q", back: "q.return"}
	withLevels := route{queue: "q", levels: &levels{ladder: ladder, backoff: Linear(time.Second)}}
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
	rt := route{queue: "q", back: "q.return"}
	d := amqp.Delivery{Headers: amqp.Table{contract.HeaderAttempt: "3"}}
	got := rt.exhausted(&d, errors.New("boom"), time.Now())
	if got.move != moveDeadLetter || got.exchange != "q.dlx" || got.key != "q" || got.reason != contract.ReasonExhausted || got.attempt != 3 {
		t.Fatalf("exhausted: %+v", got)
	}
	if got.msg.Headers[contract.HeaderAttempt] != "3" {
		t.Errorf("the DLQ copy's attempt %v; want the delivery's own, 3", got.msg.Headers[contract.HeaderAttempt])
	}
}
