package ops

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
)

func TestReadDeaths(t *testing.T) {
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	entry := func(queue, reason string, count any) amqp.Table {
		return amqp.Table{"queue": queue, "reason": reason, "count": count, "exchange": "orders.dlx",
			"routing-keys": []any{"order.created"}, "time": at}
	}
	tests := []struct {
		name string
		h    amqp.Table
		want Deaths
	}{
		{"no header", amqp.Table{"other": "x"}, Deaths{}},
		{"nil headers", nil, Deaths{}},
		{"empty array", amqp.Table{"x-death": []any{}}, Deaths{}},
		{"one entry", amqp.Table{"x-death": []any{entry("orders", "rejected", int64(3))}},
			Deaths{Count: 3, Entries: []Death{{Queue: "orders", Reason: "rejected", Exchange: "orders.dlx", RoutingKeys: []string{"order.created"}, Count: 3, Time: at}}}},
		{"entries for other queues count too", amqp.Table{"x-death": []any{
			entry("orders", "rejected", int64(2)), entry("orders.wait.1s", "expired", int32(5)), amqp.Table{"count": uint8(1)},
		}}, Deaths{Count: 8, Entries: []Death{
			{Queue: "orders", Reason: "rejected", Exchange: "orders.dlx", RoutingKeys: []string{"order.created"}, Count: 2, Time: at},
			{Queue: "orders.wait.1s", Reason: "expired", Exchange: "orders.dlx", RoutingKeys: []string{"order.created"}, Count: 5, Time: at},
			{Count: 1},
		}}},
		{"not an array", amqp.Table{"x-death": "3"}, Deaths{Problem: "x-death is a string, not an array"}},
		{"a table instead of an array", amqp.Table{"x-death": amqp.Table{"count": int64(1)}}, Deaths{Problem: "x-death is a table, not an array"}},
		{"entry not a table", amqp.Table{"x-death": []any{entry("q", "expired", int64(1)), "oops"}}, Deaths{Problem: "x-death entry 2 is a string, not a table"}},
		{"missing count", amqp.Table{"x-death": []any{amqp.Table{"queue": "q"}}}, Deaths{Problem: "x-death entry 1 has no count"}},
		{"string count", amqp.Table{"x-death": []any{entry("q", "expired", "7")}}, Deaths{Problem: "x-death entry 1 has count a string, not an integer"}},
		{"float count", amqp.Table{"x-death": []any{entry("q", "expired", 2.5)}}, Deaths{Problem: "x-death entry 1 has count a float, not an integer"}},
		{"whole float count (contract.Integer)", amqp.Table{"x-death": []any{amqp.Table{"count": 3.0}}}, Deaths{Problem: "x-death entry 1 has count a float, not an integer"}},
		{"null count", amqp.Table{"x-death": []any{entry("q", "expired", nil)}}, Deaths{Problem: "x-death entry 1 has count null, not an integer"}},
		{"negative count", amqp.Table{"x-death": []any{entry("q", "expired", int64(-1))}}, Deaths{Problem: "x-death entry 1 has a negative count -1"}},
		{"overflow", amqp.Table{"x-death": []any{amqp.Table{"count": int64(1 << 62)}, amqp.Table{"count": int64(1 << 62)}, amqp.Table{"count": int64(1 << 62)}}},
			Deaths{Problem: "x-death counts overflow"}},
		{"odd field types are ignored, the count still counts", amqp.Table{"x-death": []any{amqp.Table{"count": int16(4), "queue": int64(1), "routing-keys": "k"}}},
			Deaths{Count: 4, Entries: []Death{{Count: 4}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, ReadDeaths(tt.h)); diff != "" {
				t.Errorf("ReadDeaths (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGlob(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"dlq.*", "dlq.orders", true},
		{"dlq.*", "dlq.", true},
		{"dlq.*", "dlq", false},
		{"dlq.*", "xdlq.orders", false},
		{"*.dlq", "orders.created.dlq", true},
		{"*.dlq", "orders.dlq.dead", false},
		{"*", "a/b c", true},
		{"?", "é", true},
		{"?", "ab", false},
		{"a*b*c", "aXbYbZc", true},
		{"a*b*c", "aXbYbZ", false},
		{"[a]", "[a]", true}, // no character classes
		{"[a]", "a", false},
		{"", "", true},
		{"", "a", false},
		{"**", "", true},
	}
	for _, tt := range tests {
		if got := Glob(tt.pattern, tt.name); got != tt.want {
			t.Errorf("Glob(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}

// TestCountDeaths: rmqtopo's own record of deaths, beside x-death.
func TestCountDeaths(t *testing.T) {
	retryEx := contract.RetryExchange("orders")
	for _, c := range []struct {
		name  string
		d     amqp.Delivery
		queue string
		want  DeathCount
	}{
		{"rejected by the helper", amqp.Delivery{Exchange: "orders.dlx", RoutingKey: "orders",
			Headers: amqp.Table{contract.HeaderDeadLetterReason: "rejected", contract.HeaderAttempt: "2"}}, "orders.dlq", DeathCount{Rmqtopo: 1}},
		{"exhausted through the alternate exchange", amqp.Delivery{Exchange: retryEx, RoutingKey: "orders",
			Headers: amqp.Table{contract.HeaderAttempt: "4"}}, "orders.dlq", DeathCount{Rmqtopo: 1}},
		{"an immediate retry is no death", amqp.Delivery{Exchange: retryEx, RoutingKey: "orders",
			Headers: amqp.Table{contract.HeaderAttempt: "1"}}, "orders", DeathCount{}},
		{"replayed twice, dead again", amqp.Delivery{Exchange: "orders.dlx", RoutingKey: "orders",
			Headers: amqp.Table{contract.HeaderDeadLetterReason: "rejected", contract.HeaderReplayCount: "2"}}, "orders.dlq", DeathCount{Rmqtopo: 3}},
		{"broker deaths add up", amqp.Delivery{Exchange: "", RoutingKey: "orders",
			Headers: amqp.Table{contract.HeaderReplayCount: "1", "x-death": []any{amqp.Table{"count": int64(2)}}}}, "orders.dlq", DeathCount{Broker: 2, Rmqtopo: 1}},
	} {
		if got := CountDeaths(&c.d, c.queue); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}
