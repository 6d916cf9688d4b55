package contract

import (
	"testing"
	"time"
)

func TestParseWaitQueue(t *testing.T) {
	cases := []struct {
		name string
		want WaitQueue
		ok   bool
	}{
		{SharedWaitQueue(5 * time.Second), WaitQueue{Layout: WaitShared, Delay: 5 * time.Second}, true},
		{SharedWaitQueuePrefix + "junk", WaitQueue{Layout: WaitShared}, true},
		{PerAttemptWaitQueue("orders.v1", 3, 1500*time.Millisecond), WaitQueue{Layout: WaitPerAttempt, Queue: "orders.v1", Attempt: 3, Delay: 1500 * time.Millisecond}, true},
		{OutboxDelayQueue("demo.q", 15*time.Second), WaitQueue{Layout: WaitOutbox, Queue: "demo.q", Delay: 15 * time.Second}, true},
		{SpringWaitQueue(2 * time.Minute), WaitQueue{Layout: WaitSpring, Delay: 2 * time.Minute}, true},
		{"wait-queue-1500", WaitQueue{Layout: WaitSpring, Delay: 1500 * time.Millisecond}, true},
		{"orders", WaitQueue{}, false},
		{"orders.wait.x.5s", WaitQueue{}, false},
		{"wait-queue-", WaitQueue{}, false},
	}
	for _, c := range cases {
		got, ok := ParseWaitQueue(c.name)
		if ok != c.ok || got != c.want {
			t.Errorf("ParseWaitQueue(%q) = %+v, %v; want %+v, %v", c.name, got, ok, c.want, c.ok)
		}
		if IsWaitQueue(c.name) != c.ok {
			t.Errorf("IsWaitQueue(%q) = %v, want %v", c.name, !c.ok, c.ok)
		}
	}
}

func TestParseDelayRoundTrip(t *testing.T) {
	for _, d := range []time.Duration{0, 100 * time.Millisecond, time.Second, 90 * time.Second, 5 * time.Minute, 3 * time.Hour} {
		got, ok := ParseDelay(FormatDelay(d))
		if !ok || got != d {
			t.Errorf("ParseDelay(FormatDelay(%v)) = %v, %v", d, got, ok)
		}
	}
	for _, bad := range []string{"", "s", "5", "-1s", "5x", "99999999999999999999h"} {
		if _, ok := ParseDelay(bad); ok {
			t.Errorf("ParseDelay(%q) accepted", bad)
		}
	}
}

// GeneratedFor knows every name the contract generates for a work queue,
// GoQueue's included, and leaves other names alone.
func TestGeneratedFor(t *testing.T) {
	for _, name := range []string{
		RetryExchange("orders"), DeadLetterExchange("orders"), DeadLetterQueue("orders"), ParkingLotQueue("orders"),
		GoQueueRetryExchange("orders"), GoQueueRetryDLX("orders"), GoQueueRetryQueue("orders", 3), ExhaustedQueue("orders"),
		PerAttemptWaitQueue("orders", 2, 5*time.Second),
	} {
		if got := GeneratedFor(name); got != "orders" {
			t.Errorf("GeneratedFor(%q) = %q, want %q", name, got, "orders")
		}
	}
	for _, name := range []string{"orders", SharedWaitQueue(5 * time.Second), "dlq", ".dlq"} {
		if got := GeneratedFor(name); got != name {
			t.Errorf("GeneratedFor(%q) = %q, want the name itself", name, got)
		}
	}
}
