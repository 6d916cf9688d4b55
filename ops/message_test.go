package ops

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
)

func intp(n int) *int       { return &n }
func int64p(n int64) *int64 { return &n }

func TestDecode(t *testing.T) {
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	death := amqp.Table{"queue": "orders", "reason": "rejected", "count": int64(1), "exchange": "orders",
		"routing-keys": []any{"order.created"}, "time": at}
	tests := []struct {
		name string
		d    amqp.Delivery
		want Message
	}{{
		name: "the contract's reason header wins over x-death",
		d: amqp.Delivery{Exchange: "orders.dlx", RoutingKey: "orders", Body: []byte("{}"), Headers: amqp.Table{
			contract.HeaderDeadLetterReason: contract.ReasonRejected, contract.HeaderAttempt: "2",
			contract.HeaderFirstFailure: "2024-04-30T10:00:00Z", contract.HeaderLastError: "boom",
			contract.HeaderOriginalExchange: "shop", contract.HeaderOriginalRoutingKey: "order.paid",
			"x-death": []any{death},
		}},
		want: Message{Position: 1, Exchange: "orders.dlx", RoutingKey: "orders", Reason: "rejected", ReasonSource: "header",
			Attempt: intp(2), Deaths: 1, FirstFailure: "2024-04-30T10:00:00Z", LastError: "boom",
			OriginalExchange: "shop", OriginalRoutingKey: "order.paid", Size: 2, Body: "{}", BodyEncoding: "utf-8"},
	}, {
		name: "broker dead-lettering: reason, first failure and route from x-death",
		d: amqp.Delivery{Exchange: "orders.dlx", RoutingKey: "order.created", Redelivered: true, Body: []byte{0xff, 0x00}, Headers: amqp.Table{
			"x-death": []any{death}, "x-first-death-exchange": "shop", "x-delivery-count": int64(3),
		}},
		want: Message{Position: 1, Exchange: "orders.dlx", RoutingKey: "order.created", Redelivered: true, DeliveryCount: int64p(3),
			Reason: "rejected", ReasonSource: "x-death", Deaths: 1, FirstFailure: "2024-05-01T12:00:00Z",
			OriginalExchange: "shop", OriginalRoutingKey: "order.created", Size: 2, Body: "/wA=", BodyEncoding: "base64"},
	}, {
		name: "an attempt and no reason: the retries ran out",
		d:    amqp.Delivery{Exchange: "orders.retry", RoutingKey: "orders", Headers: amqp.Table{contract.HeaderAttempt: "6"}},
		want: Message{Position: 1, Exchange: "orders.retry", RoutingKey: "orders", Reason: ReasonRetriesExhausted, ReasonSource: "attempt",
			Attempt: intp(6), OriginalExchange: "orders.retry", OriginalRoutingKey: "orders", BodyEncoding: "utf-8"},
	}, {
		name: "malformed headers are shown, not trusted",
		d: amqp.Delivery{RoutingKey: "q", Headers: amqp.Table{
			contract.HeaderAttempt: "-4", "x-death": "bogus", contract.HeaderReplayCount: "2",
		}},
		want: Message{Position: 1, RoutingKey: "q", Reason: ReasonRetriesExhausted, ReasonSource: "attempt",
			AttemptRaw: "-4", DeathsUnreadable: "x-death is a string, not an array", ReplayCount: 2,
			OriginalRoutingKey: "q", BodyEncoding: "utf-8"},
	}, {
		name: "nothing to go on",
		d:    amqp.Delivery{RoutingKey: "q"},
		want: Message{Position: 1, RoutingKey: "q", Reason: ReasonUnknown, OriginalRoutingKey: "q", BodyEncoding: "utf-8"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decode(1, &tt.d)
			got.Headers = nil // checked in TestDecodeHeadersJSON
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Decode (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeHeadersJSON(t *testing.T) {
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	d := amqp.Delivery{Headers: amqp.Table{
		"t": at, "b": []byte("text"), "bin": []byte{0xff}, "dec": amqp.Decimal{Scale: 2, Value: 12345},
		"nested": amqp.Table{"list": []any{at, int32(1)}},
	}}
	want := map[string]any{
		"t": "2024-05-01T12:00:00Z", "b": "text", "bin": "/w==", "dec": "123.45",
		"nested": map[string]any{"list": []any{"2024-05-01T12:00:00Z", int32(1)}},
	}
	if diff := cmp.Diff(want, Decode(1, &d).Headers); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
}

func TestReplayHeaders(t *testing.T) {
	now := time.Date(2024, 5, 2, 8, 30, 0, 5, time.FixedZone("x", 3600))
	in := amqp.Table{
		contract.HeaderAttempt: "5", contract.HeaderFirstFailure: "2024-05-01T00:00:00Z", contract.HeaderLastError: "boom",
		contract.HeaderDeadLetterReason: "rejected", contract.HeaderOriginalRoutingKey: "order.created",
		"x-death": []any{}, "x-first-death-queue": "orders", "x-last-death-reason": "rejected", "x-delivery-count": int64(2),
		contract.HeaderReplayCount: "1", "tenant": "acme",
	}
	// Only the attempt, the reason and the broker's headers go: the
	// failure history stays with the message.
	want := amqp.Table{
		contract.HeaderOriginalRoutingKey: "order.created", "tenant": "acme",
		contract.HeaderFirstFailure: "2024-05-01T00:00:00Z", contract.HeaderLastError: "boom",
		contract.HeaderReplayCount: "2", contract.HeaderReplayedAt: "2024-05-02T07:30:00.000000005Z",
	}
	if diff := cmp.Diff(want, ReplayHeaders(in, now)); diff != "" {
		t.Errorf("ReplayHeaders (-want +got):\n%s", diff)
	}
	if in[contract.HeaderAttempt] != "5" {
		t.Error("ReplayHeaders changed its input")
	}
	// A first replay, and a count of the wrong type, start at 1.
	for _, h := range []amqp.Table{nil, {contract.HeaderReplayCount: "many"}} {
		if got := ReplayHeaders(h, now)[contract.HeaderReplayCount]; got != "1" {
			t.Errorf("ReplayHeaders(%v) count = %v, want \"1\"", h, got)
		}
	}
}

func TestReplayTarget(t *testing.T) {
	for _, tt := range []struct{ queue, to, want, err string }{
		{"orders.dlq", "", "orders", ""},
		{"orders.dlq", "elsewhere", "elsewhere", ""},
		{"orders", "", "", `queue "orders" is not named like a DLQ`},
		{".dlq", "", "", "not named like a DLQ"},
	} {
		got, err := ReplayTarget(tt.queue, tt.to)
		if got != tt.want || (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("ReplayTarget(%q, %q) = %q, %v; want %q, error containing %q", tt.queue, tt.to, got, err, tt.want, tt.err)
		}
	}
}

func TestPlanSweep(t *testing.T) {
	queues := []Queue{{Name: "dlq.a"}, {Name: "dlq.b"}, {Name: "orders"}, {Name: "dead.dlq.a"}}
	got, err := PlanSweep(queues, SweepOptions{Pattern: "dlq.*", MaxDeaths: 3, To: "dead.{name}"})
	if err != nil {
		t.Fatal(err)
	}
	want := []SweepSource{{Queue: Queue{Name: "dlq.a"}, Target: "dead.dlq.a"}, {Queue: Queue{Name: "dlq.b"}, Target: "dead.dlq.b"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PlanSweep (-want +got):\n%s", diff)
	}
	for _, tt := range []struct {
		o   SweepOptions
		err string
	}{
		{SweepOptions{Pattern: "nothing.*", To: "dead.{name}"}, `no queue matches the pattern "nothing.*"`},
		{SweepOptions{Pattern: "*a", To: "dead.{name}"}, `target "dead.dlq.a" of queue "dlq.a" matches the pattern "*a"`},
		{SweepOptions{Pattern: "orders", To: "{name}"}, `target "orders" of queue "orders" is the queue itself`},
		{SweepOptions{Pattern: "dlq.*", To: "x", MaxDeaths: -1}, "must not be negative"},
		{SweepOptions{To: "x"}, "a pattern is required"},
		{SweepOptions{Pattern: "x"}, "a target queue is required"},
	} {
		if _, err := PlanSweep(queues, tt.o); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("PlanSweep(%+v) error = %v, want one containing %q", tt.o, err, tt.err)
		}
	}
}

// A sweep's target must be a queue of the specs that exists (a dry run
// need not find it), or one --unmanaged-target allows.
func TestCheckSweepTargets(t *testing.T) {
	queues := []Queue{{Name: "dlq.a"}, {Name: "dead.dlq.a"}}
	sources := []SweepSource{{Queue: queues[0], Target: "dead.dlq.a"}}
	missing := []SweepSource{{Queue: queues[0], Target: "parked"}}
	declared := map[string]bool{"dead.dlq.a": true, "parked": true}
	for _, tt := range []struct {
		name              string
		sources           []SweepSource
		declared          map[string]bool
		unmanaged, dryRun bool
		err               string
	}{
		{"declared and there", sources, declared, false, false, ""},
		{"declared, not there", missing, declared, false, false, `target "parked" is in the specs but not on the broker; run rmqtopo apply first`},
		{"declared, not there, dry run", missing, declared, false, true, ""},
		{"undeclared", sources, nil, false, false, `target "dead.dlq.a" of queue "dlq.a" is not a queue of any spec given`},
		{"undeclared, unmanaged allowed", missing, nil, true, false, ""},
	} {
		err := CheckSweepTargets(tt.sources, queues, tt.declared, tt.unmanaged, tt.dryRun)
		if (tt.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.err)
		}
	}
}

func TestCheckLeaveSafe(t *testing.T) {
	for _, tt := range []struct {
		q     Queue
		major int
		ok    bool
	}{
		{Queue{Name: "c", Type: "classic"}, 4, true},
		{Queue{Name: "q", Type: "quorum"}, 3, true},  // 3.x: no default limit
		{Queue{Name: "q", Type: "quorum"}, 4, false}, // 4.x: 20 by default
		{Queue{Name: "q", Type: "quorum", DeliveryLimit: 1_000_000}, 4, true},
		{Queue{Name: "q", Type: "quorum", DeliveryLimit: 20}, 3, false},
		{Queue{Name: "q", Type: "quorum", DeliveryLimit: 5}, 3, false},
	} {
		err := CheckLeaveSafe(tt.q, tt.major)
		if (err == nil) != tt.ok {
			t.Errorf("CheckLeaveSafe(%+v, %d) = %v, want ok=%v", tt.q, tt.major, err, tt.ok)
		}
	}
}
