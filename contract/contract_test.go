package contract

import (
	"strings"
	"testing"
	"time"
)

func TestParseAttempt(t *testing.T) {
	tests := []struct {
		in     any
		want   int
		wantOK bool
	}{
		{nil, 1, true},
		{"1", 1, true},
		{"0", 0, false},
		{"3", 3, true},
		{" 7 ", 7, true},
		{[]byte("2"), 2, true},
		{int32(4), 4, true},
		{int64(5), 5, true},
		{uint8(6), 6, true},
		{"1000", 1000, true},
		{"1001", 0, false},
		{"-1", 0, false},
		{int64(-1), 0, false},
		{"99999999999999999999", 0, false},
		{"1.5", 0, false},
		{"one", 0, false},
		{"", 0, false},
		// A float is not an AMQP integer, whole or not (contract.Integer).
		{1.0, 0, false},
		{float32(3), 0, false},
		{2.5, 0, false},
		{uint64(9), 9, true},
		{true, 0, false},
		{map[string]any{"a": 1}, 0, false},
	}
	for _, tt := range tests {
		got, ok := ParseAttempt(tt.in)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("ParseAttempt(%#v) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestAttemptValueRoundTrips(t *testing.T) {
	for n := FirstAttempt; n <= MaxAttempt; n++ {
		got, ok := ParseAttempt(AttemptValue(n))
		if !ok || got != n {
			t.Fatalf("ParseAttempt(AttemptValue(%d)) = %d, %v", n, got, ok)
		}
	}
}

func TestFormatDelay(t *testing.T) {
	tests := map[time.Duration]string{
		1500 * time.Millisecond: "1500ms",
		2 * time.Second:         "2s",
		90 * time.Second:        "90s",
		5 * time.Minute:         "5m",
		90 * time.Minute:        "90m",
		2 * time.Hour:           "2h",
		100 * time.Millisecond:  "100ms",
		0:                       "0s",
	}
	for in, want := range tests {
		if got := FormatDelay(in); got != want {
			t.Errorf("FormatDelay(%v) = %q, want %q", in, got, want)
		}
	}
}

// The broker owns the x- namespace, and a headers exchange ignores x-
// headers when it matches, so no contract header may start with "x-".
func TestHeadersAvoidBrokerNamespace(t *testing.T) {
	for _, h := range []string{HeaderAttempt, HeaderFirstFailure, HeaderLastError, HeaderOriginalExchange,
		HeaderOriginalRoutingKey, HeaderDeadLetterReason, HeaderReplayCount, HeaderReplayedAt} {
		if strings.HasPrefix(strings.ToLower(h), "x-") || DeathHeaders(h) {
			t.Errorf("header %q collides with the broker's namespace", h)
		}
	}
}

func TestDeathHeaders(t *testing.T) {
	for h, want := range map[string]bool{
		"x-death": true, "x-first-death-queue": true, "x-last-death-reason": true, "x-delivery-count": true,
		"x-acquired-count": true, "x-match": false, "traceparent": false, HeaderAttempt: false,
	} {
		if got := DeathHeaders(h); got != want {
			t.Errorf("DeathHeaders(%q) = %v, want %v", h, got, want)
		}
	}
	for h, want := range map[string]bool{
		"x-delivery-count": true, "x-acquired-count": true, "x-death": false, "x-first-death-queue": false, HeaderAttempt: false,
	} {
		if got := DeliveryHeaders(h); got != want {
			t.Errorf("DeliveryHeaders(%q) = %v, want %v", h, got, want)
		}
	}
}

func TestWaitQueueNamesCarryTheirDelay(t *testing.T) {
	if got, want := PerAttemptWaitQueue("orders", 2, 5*time.Second), "orders.wait.2.5s"; got != want {
		t.Errorf("PerAttemptWaitQueue = %q, want %q", got, want)
	}
	if got, want := SharedWaitQueue(1500*time.Millisecond), "rmqtopo.wait.1500ms"; got != want {
		t.Errorf("SharedWaitQueue = %q, want %q", got, want)
	}
	args := AttemptBindingArgs(3)
	if args["x-match"] != "all" || args[HeaderAttempt] != "3" {
		t.Errorf("AttemptBindingArgs(3) = %v: the attempt must be matched as the string \"3\"", args)
	}
}

func TestMigrationQueue(t *testing.T) {
	for _, q := range []string{"orders", "a.rmqtopo-migrate", "x y"} {
		got, ok := ParseMigrationQueue(MigrationQueue(q))
		if !ok || got != q {
			t.Errorf("ParseMigrationQueue(MigrationQueue(%q)) = %q, %t", q, got, ok)
		}
	}
	for _, name := range []string{"orders", ".rmqtopo-migrate", "orders.rmqtopo-migrat"} {
		if q, ok := ParseMigrationQueue(name); ok {
			t.Errorf("ParseMigrationQueue(%q) = %q, true; want false", name, q)
		}
	}
}
