package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkPlanAgainstEmpty measures `rmqtopo plan --against empty` on a
// spec of RMQTOPO_BENCH_QUEUES work queues (default 150,000), each bound
// to a topic exchange with two delayed retries: load, expand, diff,
// check and render, no broker. It reports the wall time and the peak heap.
func BenchmarkPlanAgainstEmpty(b *testing.B) {
	queues := 150_000
	if v, err := strconv.Atoi(os.Getenv("RMQTOPO_BENCH_QUEUES")); err == nil && v > 0 {
		queues = v
	}
	var sb strings.Builder
	sb.WriteString("version: 1\nname: big\nexchanges:\n  - {name: biz, type: topic}\nqueues:\n")
	for i := 0; i < queues; i++ {
		fmt.Fprintf(&sb, "  - name: svc%06d.work\n    bindings: [{exchange: biz, routing_key: \"k.%d\"}]\n    retry: {delays: [1s, 5s]}\n", i, i)
	}
	path := filepath.Join(b.TempDir(), "big.yaml")
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		err := run(context.Background(), []string{"--max-spec-size", "1GiB", "plan", "--against", "empty", path}, strings.NewReader(""), io.Discard, io.Discard)
		took := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		b.ReportMetric(took.Seconds(), "plan-s")
		b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/(1<<20), "alloc-MiB")
		fmt.Fprintf(os.Stderr, "BenchmarkPlanAgainstEmpty: %d queues: %s, %.0f MiB allocated\n", queues, took.Round(time.Millisecond),
			float64(after.TotalAlloc-before.TotalAlloc)/(1<<20))
	}
}
