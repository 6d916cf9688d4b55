package main

import (
	"fmt"
	"math"
	"runtime"
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

// TestStrain checks when collection counts as strain on the limit.
func TestStrain(t *testing.T) {
	const limit = 800
	at := func(live int64, gc, all float64) gcLook { return gcLook{live: live, gcCPU: gc, allCPU: all} }
	for _, tc := range []struct {
		name        string
		before, now gcLook
		want        float64
	}{
		{"near the limit, mostly collecting", at(0, 1, 2), at(750, 1.8, 3), 0.8},
		{"near the limit, mostly working", at(0, 1, 2), at(750, 1.3, 3), 0},
		{"far from the limit, mostly collecting", at(0, 1, 2), at(600, 1.8, 3), 0},
		{"no CPU between looks", at(750, 1, 2), at(750, 1, 2), 0},
	} {
		if got := strain(limit, tc.before, tc.now); got < tc.want-1e-9 || got > tc.want+1e-9 {
			t.Errorf("%s: strain %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestOutgrow holds more live heap than a limit allows and keeps
// allocating: the watch must lift the limit and set outgrowPercent,
// rather than leave the runtime collecting without pause.
func TestOutgrow(t *testing.T) {
	const limit = 64 << 20
	prevLimit := debug.SetMemoryLimit(limit)
	prevPercent := debug.SetGCPercent(100)
	defer func() {
		debug.SetMemoryLimit(prevLimit)
		debug.SetGCPercent(prevPercent)
	}()
	stop := outgrow(limit, true)
	defer stop()
	// A heap like a plan's: millions of small objects of pointers, about
	// 96 MiB live, over the limit.
	type node struct {
		next *node
		name *string
		pad  [2]int64
	}
	var live *node
	for i := range 3 << 20 {
		s := fmt.Sprint(i)
		live = &node{next: live, name: &s}
	}
	// Bounded by work, not by a clock: the watch lifts the limit after
	// outgrowAfter CPU seconds of strained collection, however long a busy
	// machine takes to give them. The limit is lifted while the live heap
	// above is built (0 rounds, logged) or within a few rounds; a watch
	// that never lifts it fails after maxRounds (50 GiB allocated).
	const maxRounds = 12_800
	var sink []byte
	rounds := 0
	for ; debug.SetMemoryLimit(-1) != math.MaxInt64; rounds++ {
		if rounds == maxRounds {
			t.Fatalf("the limit was not lifted after %d rounds of 4 MiB allocated under it", maxRounds)
		}
		for range 64 {
			sink = make([]byte, 64<<10)
		}
	}
	t.Logf("the limit was lifted after %d rounds of 4 MiB", rounds)
	if got := debug.SetGCPercent(-1); got != outgrowPercent {
		t.Errorf("GOGC after outgrowing: %d, want %d", got, outgrowPercent)
	}
	runtime.KeepAlive(live)
	runtime.KeepAlive(sink)
}
