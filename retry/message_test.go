package retry

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
)

func TestRepublishing(t *testing.T) {
	now := time.Date(2025, 3, 4, 5, 6, 7, 890, time.FixedZone("X", 3600))
	d := amqp.Delivery{
		Exchange: "biz", RoutingKey: "order.created",
		ContentType: "application/json", ContentEncoding: "gzip", DeliveryMode: amqp.Persistent, Priority: 7,
		CorrelationId: "c", ReplyTo: "r", MessageId: "m", Timestamp: time.Unix(1, 0), Type: "t", AppId: "a",
		Expiration: "60000", UserId: "someone-else",
		Headers: amqp.Table{
			"traceparent":          "tp",
			"x-death":              []any{amqp.Table{"queue": "w"}},
			"x-first-death-queue":  "w",
			"x-last-death-reason":  "expired",
			"x-delivery-count":     int64(2),
			"x-other":              "kept",
			contract.HeaderAttempt: "2",
		},
		Body: []byte("body"),
	}
	got := republishing(&d, errors.New("boom"), now)
	want := amqp.Publishing{
		Headers: amqp.Table{
			"traceparent":                     "tp",
			"x-other":                         "kept",
			contract.HeaderAttempt:            "2", // the caller sets the next one
			contract.HeaderFirstFailure:       "2025-03-04T04:06:07.00000089Z",
			contract.HeaderLastError:          "boom",
			contract.HeaderOriginalExchange:   "biz",
			contract.HeaderOriginalRoutingKey: "order.created",
		},
		ContentType: "application/json", ContentEncoding: "gzip", DeliveryMode: amqp.Persistent, Priority: 7,
		CorrelationId: "c", ReplyTo: "r", MessageId: "m", Timestamp: time.Unix(1, 0), Type: "t", AppId: "a",
		Body: []byte("body"),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("republishing (-want +got):\n%s", diff)
	}
	if _, ok := d.Headers[contract.HeaderLastError]; ok {
		t.Error("republishing changed the delivery's headers")
	}

	// A later failure keeps the first failure and the original route.
	d2 := amqp.Delivery{Exchange: "", RoutingKey: "work", Headers: got.Headers}
	got2 := republishing(&d2, nil, now.Add(time.Hour))
	for _, h := range []string{contract.HeaderFirstFailure, contract.HeaderOriginalExchange, contract.HeaderOriginalRoutingKey} {
		if got2.Headers[h] != got.Headers[h] {
			t.Errorf("%s changed on a later failure: %v -> %v", h, got.Headers[h], got2.Headers[h])
		}
	}
	if got2.Headers[contract.HeaderLastError] != "retry requested" {
		t.Errorf("last error for a nil cause: %v", got2.Headers[contract.HeaderLastError])
	}
}

func TestTruncateUTF8(t *testing.T) {
	for _, tc := range []struct {
		in    string
		limit int
		want  string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"abcdefghijk", 10, "abcdefg…"},
		{"ééééééé", 10, "ééé…"}, // 2-byte runes: 7 bytes room, cut back to 6
		{"€€€€", 8, "€…"},       // 3-byte runes: 5 bytes room, cut back to 3
		{"ab\xffcd", 10, "ab\uFFFDcd"},
		{"abcdef", 2, "ab"},
	} {
		got := truncateUTF8(tc.in, tc.limit)
		if got != tc.want || len(got) > tc.limit || !utf8.ValidString(got) {
			t.Errorf("truncateUTF8(%q, %d) = %q (%d bytes), want %q", tc.in, tc.limit, got, len(got), tc.want)
		}
	}
	long := strings.Repeat("𝄞", 1000) // 4-byte runes
	if got := errorText(errors.New(long)); len(got) > contract.MaxErrorBytes || !utf8.ValidString(got) {
		t.Errorf("errorText of %d bytes gave %d bytes, valid %v", len(long), len(got), utf8.ValidString(got))
	}
}

func TestSameMessage(t *testing.T) {
	pd := &pending{exchange: "work.retry", key: "work", msg: &amqp.Publishing{
		MessageId: "m", Body: []byte("b"), Headers: amqp.Table{contract.HeaderAttempt: "2", "n": 1},
	}}
	ret := amqp.Return{Exchange: "work.retry", RoutingKey: "work", MessageId: "m", Body: []byte("b"),
		Headers: amqp.Table{contract.HeaderAttempt: "2", "n": int32(1)}} // the codec may change integer types
	if !sameMessage(pd, &ret) {
		t.Error("a return of the message does not match it")
	}
	for name, edit := range map[string]func(*amqp.Return){
		"exchange": func(r *amqp.Return) { r.Exchange = "other.retry" },
		"key":      func(r *amqp.Return) { r.RoutingKey = "other" },
		"id":       func(r *amqp.Return) { r.MessageId = "m2" },
		"attempt":  func(r *amqp.Return) { r.Headers = amqp.Table{contract.HeaderAttempt: "3"} },
		"body":     func(r *amqp.Return) { r.Body = []byte("c") },
	} {
		r := ret
		edit(&r)
		if sameMessage(pd, &r) {
			t.Errorf("a return with another %s matches", name)
		}
	}
}

func TestOutcomeString(t *testing.T) {
	got := []string{Acked.String(), Retried.String(), DeadLettered.String(), Requeued.String(), Outcome(0).String()}
	want := []string{"ack", "retry", "dead-letter", "requeue", "Outcome(0)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
