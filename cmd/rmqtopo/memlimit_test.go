package main

import (
	"math"
	"runtime/debug"
	"testing"
)

// TestSetMemoryLimit checks each form of --memory-limit, and that the
// previous limit comes back: commands run in the test process.
func TestSetMemoryLimit(t *testing.T) {
	const before = 3 << 30
	prev := debug.SetMemoryLimit(before)
	defer debug.SetMemoryLimit(prev)
	noEnv := func(string) string { return "" }
	withEnv := func(k string) string {
		if k == "GOMEMLIMIT" {
			return "2GiB"
		}
		return ""
	}
	for _, tc := range []struct {
		flag   string
		getenv func(string) string
		want   int64
	}{
		{"", noEnv, defaultMemoryLimit},
		{"", withEnv, before}, // the runtime applied GOMEMLIMIT already
		{"off", noEnv, math.MaxInt64},
		{"OFF", withEnv, math.MaxInt64},
		{"1GiB", withEnv, 1 << 30},
		{"600MiB", noEnv, 600 << 20},
	} {
		restore, err := setMemoryLimit(tc.flag, tc.getenv)
		if err != nil {
			t.Fatalf("%q: %v", tc.flag, err)
		}
		if got := debug.SetMemoryLimit(-1); got != tc.want {
			t.Errorf("--memory-limit %q: limit %d, want %d", tc.flag, got, tc.want)
		}
		restore()
		if got := debug.SetMemoryLimit(-1); got != before {
			t.Errorf("--memory-limit %q: restored %d, want %d", tc.flag, got, before)
		}
	}
	if _, err := setMemoryLimit("-5MiB", noEnv); err == nil {
		t.Error("--memory-limit -5MiB: no error")
	}
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("a refused --memory-limit changed the limit to %d", got)
	}
}
