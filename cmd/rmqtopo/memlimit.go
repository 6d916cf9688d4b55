package main

import (
	"math"
	"runtime/debug"
	"strings"
)

// defaultMemoryLimit is the soft memory limit rmqtopo runs with unless
// told otherwise. rmqtopo holds the desired topology and the plan in
// memory until it exits, and by default Go lets the heap grow to twice
// what is live before collecting: a 150,000-queue plan with 380 MiB live
// reached 0.66 GB. Near this limit the runtime collects more often
// instead, so that plan stays under 500 MB (docs/benchmarks.md); a job
// in a 512 MB container is not killed for garbage. A plan that needs more
// than the limit goes over it: the runtime then spends at most half the
// CPU on collection, so it runs slower, never fails.
const defaultMemoryLimit = 450 << 20

// setMemoryLimit applies --memory-limit: a size, "off", or "" for
// GOMEMLIMIT when the environment sets it (the runtime has applied it
// already) and defaultMemoryLimit otherwise. The returned func restores
// the previous limit: tests run many commands in one process.
func setMemoryLimit(flag string, getenv func(string) string) (restore func(), err error) {
	limit := int64(defaultMemoryLimit)
	switch f := strings.TrimSpace(flag); {
	case f == "" && getenv("GOMEMLIMIT") != "":
		return func() {}, nil
	case f == "":
	case strings.EqualFold(f, "off"):
		limit = math.MaxInt64
	default:
		if limit, err = parseSize(f); err != nil {
			return nil, err
		}
	}
	prev := debug.SetMemoryLimit(limit)
	return func() { debug.SetMemoryLimit(prev) }, nil
}
