// Package memlimit sets the Go runtime's soft memory limit for a run of
// rmqtopo, which holds the desired topology and the plan in memory until
// it exits: near the limit the runtime collects more often, and a default
// limit gives way to a plan that needs more.
package memlimit

import (
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
)

// Default is the soft memory limit rmqtopo runs with unless
// told otherwise. rmqtopo holds the desired topology and the plan in
// memory until it exits, and by default Go lets the heap grow to twice
// what is live before collecting: a 150,000-queue plan with 356 MiB live
// reached 0.66 GB. Near this limit the runtime collects more often
// instead, so that plan stays under 500 MB (docs/benchmarks.md) and a
// job in a 512 MB container is not killed for garbage.
const Default = 450 << 20

// Parse reads --memory-limit: a size, "off", or "" for GOMEMLIMIT
// when the environment sets it (the runtime has applied it already: keep
// is set) and Default otherwise, which is soft: it gives way to
// a plan that needs more (outgrow). A limit given is kept as given.
func Parse(flag string, getenv func(string) string) (limit int64, soft, keep bool, err error) {
	switch f := strings.TrimSpace(flag); {
	case f == "" && getenv("GOMEMLIMIT") != "":
		return 0, false, true, nil
	case f == "":
		return Default, true, false, nil
	case strings.EqualFold(f, "off"):
		return math.MaxInt64, false, false, nil
	default:
		limit, err = ParseSize(f)
		return limit, false, false, err
	}
}

// Set applies --memory-limit (see Parse) to the process.
// Only a whole process calls it (the CLI's runMain): the settings are process-wide,
// so run() in tests leaves them alone. The returned func restores the
// previous settings, for the tests of this function.
func Set(flag string, getenv func(string) string) (restore func(), err error) {
	limit, soft, keep, err := Parse(flag, getenv)
	if err != nil {
		return nil, err
	}
	if keep {
		return func() {}, nil
	}
	prevLimit := debug.SetMemoryLimit(limit)
	prevPercent := debug.SetGCPercent(-1)
	debug.SetGCPercent(prevPercent)
	stop := func() {}
	if soft {
		// GOGC set by the user is theirs to keep when the limit is lifted.
		stop = outgrow(limit, getenv("GOGC") == "")
	}
	return func() {
		stop()
		debug.SetMemoryLimit(prevLimit)
		debug.SetGCPercent(prevPercent)
	}, nil
}

// outgrowPercent is the GOGC a plan that outgrew the default limit runs
// with: the heap grows by a quarter of what is live between collections.
const outgrowPercent = 25

// outgrow watches the collector after each collection. A limit is
// strained while the live heap leaves less than an eighth of it free and
// collecting takes more than 40% of the CPU (GOMAXPROCS times the wall
// time; under a limit the runtime holds collection near half). Once the
// collector has spent outgrowAfter of CPU under strain, the limit is
// outgrown: it is lifted, and the heap grows by outgrowPercent between
// collections instead (with setPercent; else by what GOGC says). Held under a limit it has outgrown, the runtime
// collects almost without pause: a 250,000-queue plan took 12.5 s
// instead of 8.6. A plan that just fits strains it briefly at its peak
// (150,000 queues: 0.25 s) and keeps it. Collections are seen through a
// finalizer re-armed each time; stop ends the watch.
func outgrow(limit int64, setPercent bool) (stop func()) {
	var (
		mu       sync.Mutex
		stopped  bool
		last     = lookAtGC()
		strained float64
	)
	var arm func()
	arm = func() {
		runtime.SetFinalizer(new(gcSentinel), func(*gcSentinel) {
			mu.Lock()
			defer mu.Unlock()
			if stopped {
				return
			}
			now := lookAtGC()
			strained += strain(limit, last, now)
			last = now
			if strained > outgrowAfter {
				if setPercent {
					debug.SetGCPercent(outgrowPercent)
				}
				debug.SetMemoryLimit(math.MaxInt64)
				stopped = true
				return
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

// outgrowAfter is the CPU seconds of collection under strain after which
// outgrow lifts the limit.
const outgrowAfter = 1.0

// gcLook is what the runtime says after a collection: the live heap in
// bytes, and the CPU seconds spent collecting and in all.
type gcLook struct {
	live          int64
	gcCPU, allCPU float64
}

var gcSamples = []string{"/gc/heap/live:bytes", "/cpu/classes/gc/total:cpu-seconds", "/cpu/classes/total:cpu-seconds"}

func lookAtGC() gcLook {
	s := make([]metrics.Sample, len(gcSamples))
	for i, n := range gcSamples {
		s[i].Name = n
	}
	metrics.Read(s)
	var l gcLook
	if s[0].Value.Kind() == metrics.KindUint64 {
		l.live = int64(s[0].Value.Uint64())
	}
	if s[1].Value.Kind() == metrics.KindFloat64 && s[2].Value.Kind() == metrics.KindFloat64 {
		l.gcCPU, l.allCPU = s[1].Value.Float64(), s[2].Value.Float64()
	}
	return l
}

// strain returns the CPU seconds spent collecting between two looks if
// the limit was strained then: the live heap leaves less than an eighth
// of limit free, and collecting took more than 40% of the CPU. Else 0.
func strain(limit int64, before, now gcLook) float64 {
	gc, all := now.gcCPU-before.gcCPU, now.allCPU-before.allCPU
	if now.live <= limit-limit/8 || all <= 0 || gc/all <= 0.4 {
		return 0
	}
	return gc
}

// gcSentinel is a garbage object whose finalizer runs after the
// collection that found it unreachable. It is 16 bytes: the runtime packs
// smaller objects without pointers into shared blocks, whose finalizers
// run only once every object in the block is garbage, which can be many
// collections later.
type gcSentinel struct{ _ [16]byte }

// ParseSize reads a byte count: a number with an optional unit, KiB, MiB,
// GiB (or KB, MB, GB, taken as the binary ones).
func ParseSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"B", 1}} {
		if rest, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 || n > (1<<40)/mult {
		return 0, fmt.Errorf("want a size such as 4MiB or 1000000, got %q", s)
	}
	return n * mult, nil
}
