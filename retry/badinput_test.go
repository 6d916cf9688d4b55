package retry_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/retry"
)

// TestBadInput sends messages with broken or missing headers. Each must be
// handled, then either retried with sound headers or dead-lettered with a
// reason: never lost, never looping, never crashing the handler.
func TestBadInput(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("é€", 60_000) // 300 KB of multi-byte runes: far past the frame size
	type result struct {
		Deliveries int    // handler calls
		Final      string // "ack" or "dlq:<reason>"
	}
	cases := []struct {
		id      string
		headers amqp.Table
		err     string // the handler's error on a first delivery
		want    result
		check   func(t *testing.T, retried amqp.Table) // headers of the retry, if any
	}{
		{id: "no-headers", want: result{2, "ack"}, check: func(t *testing.T, h amqp.Table) {
			if h[contract.HeaderAttempt] != "2" || h[contract.HeaderOriginalExchange] != bizExchange {
				t.Errorf("retry headers %v", h)
			}
		}},
		{id: "attempt-unparseable", headers: amqp.Table{contract.HeaderAttempt: "two"}, want: result{1, "dlq:" + retry.ReasonMalformedAttempt}},
		{id: "attempt-zero", headers: amqp.Table{contract.HeaderAttempt: "0"}, want: result{1, "dlq:" + retry.ReasonMalformedAttempt}},
		{id: "attempt-negative", headers: amqp.Table{contract.HeaderAttempt: "-1"}, want: result{1, "dlq:" + retry.ReasonMalformedAttempt}},
		{id: "attempt-absurd", headers: amqp.Table{contract.HeaderAttempt: "99999999999999999999"}, want: result{1, "dlq:" + retry.ReasonMalformedAttempt}},
		{id: "attempt-large", headers: amqp.Table{contract.HeaderAttempt: int64(1_000_000)}, want: result{1, "dlq:" + retry.ReasonMalformedAttempt}},
		{id: "attempt-float", headers: amqp.Table{contract.HeaderAttempt: 1.0}, want: result{1, "dlq:" + retry.ReasonMalformedAttempt}},
		{id: "attempt-table", headers: amqp.Table{contract.HeaderAttempt: amqp.Table{"n": "1"}}, want: result{1, "dlq:" + retry.ReasonMalformedAttempt}},
		{id: "attempt-bool", headers: amqp.Table{contract.HeaderAttempt: true}, want: result{1, "dlq:" + retry.ReasonMalformedAttempt}},
		{id: "attempt-at-max", headers: amqp.Table{contract.HeaderAttempt: "1000"}, want: result{1, "dlq:" + contract.ReasonExhausted}},
		// An integer attempt is readable; the retry writes it as a string,
		// which is what the retry exchange's bindings match.
		{id: "attempt-integer", headers: amqp.Table{contract.HeaderAttempt: int32(1)}, want: result{2, "ack"}, check: func(t *testing.T, h amqp.Table) {
			if h[contract.HeaderAttempt] != "2" {
				t.Errorf("attempt after an integer 1 = %#v, want string \"2\"", h[contract.HeaderAttempt])
			}
		}},
		{id: "owned-headers-wrong-type", headers: amqp.Table{
			contract.HeaderFirstFailure: int64(5), contract.HeaderOriginalExchange: int64(6),
			contract.HeaderOriginalRoutingKey: []byte("k"), contract.HeaderLastError: amqp.Table{},
			contract.HeaderDeadLetterReason: contract.ReasonRejected,
		}, want: result{2, "ack"}, check: func(t *testing.T, h amqp.Table) {
			if ff, _ := h[contract.HeaderFirstFailure].(string); ff == "" {
				t.Errorf("first failure %#v, want a time", h[contract.HeaderFirstFailure])
			}
			if h[contract.HeaderOriginalExchange] != bizExchange || h[contract.HeaderOriginalRoutingKey] != bizKey {
				t.Errorf("original exchange/key %#v/%#v", h[contract.HeaderOriginalExchange], h[contract.HeaderOriginalRoutingKey])
			}
			if _, ok := h[contract.HeaderDeadLetterReason]; ok {
				t.Errorf("a stale dead-letter reason survived the retry")
			}
		}},
		// The retry strips the client-set death headers; the broker then
		// adds its own for the wait queue only.
		{id: "client-set-death-headers", headers: amqp.Table{
			"x-death":             []any{amqp.Table{"queue": workQueue, "reason": "rejected", "count": int64(1)}},
			"x-first-death-queue": workQueue,
			"x-last-death-reason": "rejected",
			"x-delivery-count":    int64(3),
			"x-keep":              "yes",
		}, want: result{2, "ack"}, check: func(t *testing.T, h amqp.Table) {
			wait := contract.PerAttemptWaitQueue(workQueue, 1, 100*time.Millisecond)
			deaths, _ := h["x-death"].([]any)
			if len(deaths) != 1 {
				t.Fatalf("x-death %v; want one entry, for the wait queue", h["x-death"])
			}
			if d, _ := deaths[0].(amqp.Table); d["queue"] != wait || d["reason"] != "expired" {
				t.Errorf("x-death entry %v; want queue %q, reason expired", d, wait)
			}
			if h["x-first-death-queue"] != wait {
				t.Errorf("x-first-death-queue %v, want %q", h["x-first-death-queue"], wait)
			}
			if r, ok := h["x-last-death-reason"]; ok && r != "expired" {
				t.Errorf("x-last-death-reason %v: the client-set value survived", r)
			}
			if _, ok := h["x-delivery-count"]; ok {
				t.Errorf("x-delivery-count survived the retry")
			}
			if h["x-keep"] != "yes" {
				t.Errorf("x-keep lost")
			}
		}},
		{id: "huge-error", err: huge, want: result{2, "ack"}, check: func(t *testing.T, h amqp.Table) {
			msg, _ := h[contract.HeaderLastError].(string)
			if len(msg) > contract.MaxErrorBytes || len(msg) < contract.MaxErrorBytes-4 || !utf8.ValidString(msg) ||
				!strings.HasPrefix(huge, strings.TrimSuffix(msg, "…")) || !strings.HasSuffix(msg, "…") {
				t.Errorf("last error of %d bytes (valid UTF-8: %v): %.40q...; want a truncated prefix of at most %d bytes",
					len(msg), utf8.ValidString(msg), msg, contract.MaxErrorBytes)
			}
		}},
	}

	e := newEnv(t, topo{layout: "per-attempt", queueType: "classic", delays: []string{"100ms", "100ms"}}, nil)
	r := newRetrier(t, e)
	errs := map[string]string{}
	for _, tc := range cases {
		errs[tc.id] = tc.err
	}
	// The handler fails every first delivery and succeeds on a retry.
	rec := e.consume(t, r, 4, func(_ context.Context, d amqp.Delivery) error {
		if _, isRetry := d.Headers[contract.HeaderLastError].(string); isRetry {
			return nil
		}
		if msg := errs[d.MessageId]; msg != "" {
			return errors.New(msg)
		}
		return errors.New("first delivery fails")
	})
	msgs := make([]amqp.Publishing, len(cases))
	for i, tc := range cases {
		msgs[i] = amqp.Publishing{MessageId: tc.id, Headers: tc.headers, Body: []byte(tc.id)}
	}
	e.publishMany(t, bizExchange, bizKey, msgs)

	wantDLQ := count(nil, nil)
	for _, tc := range cases {
		if strings.HasPrefix(tc.want.Final, "dlq:") {
			wantDLQ++
		}
	}
	// Guards: the dead-letters come at the first delivery (0.01 s
	// measured), the acks after a 0.1 s retry (0.1 s measured).
	dlq := brokertest.Drain(t, e.conn, contract.DeadLetterQueue(workQueue), wantDLQ, waitguard.For(time.Second))
	rec.waitFor(t, waitguard.For(time.Second), "every ack", func(evs []event) bool {
		return count(evs, func(ev event) bool { return ev.outcome == retry.Acked }) == len(cases)-wantDLQ
	})
	// A window: a looping message would show up again by now. A busy
	// machine can only make it catch less, never red.
	time.Sleep(300 * time.Millisecond)

	got := map[string]result{}
	retried := map[string]amqp.Table{}
	for _, ev := range rec.snapshot() {
		res := got[ev.messageID]
		res.Deliveries++
		if ev.err != nil {
			t.Errorf("%s: settling: %v", ev.messageID, ev.err)
		}
		if ev.outcome == retry.Acked {
			res.Final = "ack"
			retried[ev.messageID] = ev.headers
		}
		got[ev.messageID] = res
	}
	for _, d := range dlq {
		res := got[d.MessageId]
		reason, _ := d.Headers[contract.HeaderDeadLetterReason].(string)
		res.Final = "dlq:" + reason
		got[d.MessageId] = res
		if d.Headers[contract.HeaderLastError] != "first delivery fails" {
			t.Errorf("%s: DLQ copy's last error %#v", d.MessageId, d.Headers[contract.HeaderLastError])
		}
	}
	want := map[string]result{}
	for _, tc := range cases {
		want[tc.id] = tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("per message: handler calls and final state (-want +got):\n%s", diff)
	}
	for _, tc := range cases {
		if tc.check != nil && retried[tc.id] != nil {
			t.Run(tc.id, func(t *testing.T) { tc.check(t, retried[tc.id]) })
		}
	}
	if n := e.depth(t, workQueue); n != 0 {
		t.Errorf("work queue holds %d messages", n)
	}
}
