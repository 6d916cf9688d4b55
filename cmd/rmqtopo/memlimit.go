package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
)

// defaultMemoryLimit is the soft memory limit rmqtopo runs with unless
// told otherwise. rmqtopo holds the desired topology and the plan in
// memory until it exits, and by default Go lets the heap grow to twice
// what is live before collecting: a 150,000-queue plan with 380 MiB live
// reached 0.66 GB. Near this limit the runtime collects more often
// instead, so that plan stays under 500 MB (docs/benchmarks.md) and a
// job in a 512 MB container is not killed for garbage.
const defaultMemoryLimit = 450 << 20

// setMemoryLimit applies --memory-limit: a size, "off", or "" for
// GOMEMLIMIT when the environment sets it (the runtime has applied it
// already) and defaultMemoryLimit otherwise. The default follows the live
// heap (followLive) so that a plan that needs more than it never spends
// its time collecting; a limit given is kept as given. The returned func
// restores the previous limit: tests run many commands in one process.
func setMemoryLimit(flag string, getenv func(string) string) (restore func(), err error) {
	limit, follow := int64(defaultMemoryLimit), true
	switch f := strings.TrimSpace(flag); {
	case f == "" && getenv("GOMEMLIMIT") != "":
		return func() {}, nil
	case f == "":
	case strings.EqualFold(f, "off"):
		limit, follow = math.MaxInt64, false
	default:
		if limit, err = parseSize(f); err != nil {
			return nil, err
		}
		follow = false
	}
	prev := debug.SetMemoryLimit(limit)
	stop := func() {}
	if follow {
		stop = followLive(limit)
	}
	return func() { stop(); debug.SetMemoryLimit(prev) }, nil
}

// followLive raises the soft limit after each collection to a quarter
// above the live heap whenever that is more than floor. A fixed limit
// below what a plan needs has the runtime collect nearly all the time (up
// to half the CPU): a 250,000-queue plan took 1.7 times as long. Above
// the floor the heap then grows by a quarter between collections, as with
// GOGC=25. Collections are seen through a finalizer re-armed each time;
// stop ends it.
func followLive(floor int64) (stop func()) {
	var (
		mu      sync.Mutex
		stopped bool
		sample  = []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	)
	var arm func()
	arm = func() {
		runtime.SetFinalizer(new(gcSentinel), func(*gcSentinel) {
			mu.Lock()
			defer mu.Unlock()
			if stopped {
				return
			}
			metrics.Read(sample)
			if sample[0].Value.Kind() == metrics.KindUint64 {
				live := int64(sample[0].Value.Uint64())
				debug.SetMemoryLimit(max(floor, live+live/8))
			}
			arm()
		})
	}
	arm()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
	}
}

// gcSentinel is a garbage object whose finalizer runs after the
// collection that found it unreachable. It has a field: the runtime may
// not run finalizers of zero-sized objects.
type gcSentinel struct{ _ int64 }
