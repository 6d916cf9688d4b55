package contract

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

const s = time.Second

func TestBrokerExpressible(t *testing.T) {
	cases := []struct {
		delays   []time.Duration
		min, max time.Duration
		ok       bool
	}{
		{[]time.Duration{5 * s, 5 * s, 5 * s}, 5 * s, 5 * s, true},        // fixed
		{[]time.Duration{2 * s, 4 * s, 6 * s}, 2 * s, 6 * s, true},        // linear
		{[]time.Duration{2 * s, 4 * s, 5 * s, 5 * s}, 2 * s, 5 * s, true}, // capped between multiples: min(6s, 5s)
		{[]time.Duration{2 * s, 4 * s, 4 * s, 4 * s}, 2 * s, 4 * s, true}, // linear capped
		{[]time.Duration{1 * s, 2 * s, 4 * s}, 0, 0, false},               // exponential
		{[]time.Duration{0, 1 * s}, 0, 0, false},                          // immediate retry
		{[]time.Duration{3 * s, 6 * s, 3 * s}, 0, 0, false},               // down again
		{[]time.Duration{1500 * time.Microsecond}, 0, 0, false},           // not whole ms
		{nil, 0, 0, false},
	}
	for _, c := range cases {
		min, max, ok := BrokerExpressible(c.delays)
		if ok != c.ok || min != c.min || max != c.max {
			t.Errorf("BrokerExpressible(%v) = %v, %v, %v; want %v, %v, %v", c.delays, min, max, ok, c.min, c.max, c.ok)
		}
	}
}

// TestNativeRoundTrip: what NativeArguments writes, ParseNative reads back
// as the same schedule on the right route, also from the float64 numbers
// of a JSON answer.
func TestNativeRoundTrip(t *testing.T) {
	cases := []struct {
		delays []time.Duration
		jitter bool
		route  SettleRoute
	}{
		{[]time.Duration{2 * s, 4 * s, 6 * s}, false, RouteReject},
		{[]time.Duration{2 * s, 4 * s, 4 * s}, false, RouteReject},
		{[]time.Duration{2 * s, 4 * s, 6 * s}, true, RouteModified},
		{[]time.Duration{1 * s, 2 * s, 4 * s, 8 * s}, false, RouteModified},
		{[]time.Duration{0, 0, 1500 * time.Millisecond}, false, RouteModified},
	}
	for _, c := range cases {
		args := NativeArguments(c.delays, c.jitter)
		asJSON := map[string]any{}
		for k, v := range args {
			if n, ok := v.(int64); ok {
				asJSON[k] = float64(n)
			} else {
				asJSON[k] = v
			}
		}
		for _, a := range []map[string]any{args, asJSON} {
			n, err := ParseNative(a)
			if err != nil {
				t.Fatalf("ParseNative(%v): %v", a, err)
			}
			if n.Route != c.route || !slices.Equal(n.Delays, c.delays) || n.Jitter != c.jitter || n.DeliveryLimit != len(c.delays) {
				t.Errorf("ParseNative(%v) = %+v; want route %s, delays %v, jitter %v", a, n, c.route, c.delays, c.jitter)
			}
		}
	}
}

func TestParseNativeRefuses(t *testing.T) {
	if _, err := ParseNative(map[string]any{"x-queue-type": "quorum", "x-delivery-limit": int64(20)}); !errors.Is(err, ErrNotNative) {
		t.Errorf("a plain quorum queue: %v, want ErrNotNative", err)
	}
	if _, err := ParseNative(map[string]any{ArgDelayedRetryType: "disabled"}); !errors.Is(err, ErrNotNative) {
		t.Errorf("type disabled: %v, want ErrNotNative", err)
	}
	bad := []map[string]any{
		{ArgDelayedRetryType: "failed", ArgDeliveryLimit: int64(3)},                                                           // no min
		{ArgDelayedRetryType: "failed", ArgDelayedRetryMin: int64(1000)},                                                      // no limit
		{ArgDelayedRetryType: "failed", ArgDelayedRetryMin: int64(1000), ArgDelayedRetryMax: int64(500), ArgDeliveryLimit: 3}, // max below min
		{ArgRetryDelays: "1s,soon"},
		{ArgRetryDelays: "1s,2s", ArgDeliveryLimit: int64(3)},
	}
	for _, a := range bad {
		if _, err := ParseNative(a); err == nil || errors.Is(err, ErrNotNative) {
			t.Errorf("ParseNative(%v) = %v; want an error that says why", a, err)
		}
	}
}

// TestNativeMaxDefaultsToMin: a queue with only x-delayed-retry-min is the
// fixed schedule the broker applies (max defaults to min).
func TestNativeMaxDefaultsToMin(t *testing.T) {
	n, err := ParseNative(map[string]any{ArgDelayedRetryType: "failed", ArgDelayedRetryMin: int64(1000), ArgDeliveryLimit: int64(2)})
	if err != nil || !slices.Equal(n.Delays, []time.Duration{s, s}) {
		t.Fatalf("got %+v, %v; want two 1s retries", n, err)
	}
	if d, ok := n.Delay(2); !ok || d != s {
		t.Errorf("Delay(2) = %v, %v", d, ok)
	}
	if _, ok := n.Delay(4); ok {
		t.Errorf("Delay(4) is past the schedule")
	}
}

func TestAttemptOfDeliveryCount(t *testing.T) {
	for count, want := range map[int64]int{-1: 1, 0: 1, 1: 2, 4: 5, 5000: MaxAttempt} {
		if got := AttemptOfDeliveryCount(count); got != want {
			t.Errorf("AttemptOfDeliveryCount(%d) = %d, want %d", count, got, want)
		}
	}
}

func TestNativeAttempt(t *testing.T) {
	for _, c := range []struct {
		header any
		count  int64
		want   int
	}{
		{nil, 0, 1}, {nil, 2, 3}, {"3", 0, 3}, {"3", 2, 5}, {int64(4), 1, 5},
		{"bad", 1, 2}, {"0", 0, 1}, {"999", 5, MaxAttempt},
	} {
		if got := NativeAttempt(c.header, c.count); got != c.want {
			t.Errorf("NativeAttempt(%v, %d) = %d, want %d", c.header, c.count, got, c.want)
		}
	}
}

// TestBindingShape: a queue whose arguments carry the marker and its
// delivery limit (the binding shape) takes its delays from its schedule
// binding, always on the modified route, and a binding whose number of
// retries is not the limit is an error, not a schedule.
func TestBindingShape(t *testing.T) {
	args := map[string]any{"x-queue-type": "quorum", ArgDelayedRetryType: DelayedRetryFailed, ArgDeliveryLimit: float64(2)}
	if !IsInPlace(args) {
		t.Fatal("the binding shape's arguments are not IsInPlace")
	}
	if n, ok := LimitInArguments(args); !ok || n != 2 {
		t.Errorf("LimitInArguments = %d, %v; want 2, true", n, ok)
	}
	if _, ok := LimitInArguments(NativeMarker()); ok {
		t.Error("the policy shape's marker has a limit in its arguments")
	}
	linear := ScheduleArguments([]time.Duration{time.Second, 2 * time.Second}, false)
	n, err := NativeOf(args, linear)
	if err != nil || n.Route != RouteModified || n.DeliveryLimit != 2 {
		t.Errorf("NativeOf = %+v, %v; want the modified route, 2 retries", n, err)
	}
	if n, err := NativeOf(NativeMarker(), linear); err != nil || n.Route != RouteReject {
		t.Errorf("the policy shape: NativeOf = %+v, %v; want the reject route", n, err)
	}
	three := ScheduleArguments([]time.Duration{time.Second, time.Second, time.Second}, false)
	if _, err := NativeOf(args, three); err == nil || !strings.Contains(err.Error(), "3 retries") {
		t.Errorf("a binding of 3 retries on a limit of 2: %v; want an error naming them", err)
	}
}
