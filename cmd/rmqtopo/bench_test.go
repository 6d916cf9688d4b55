package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkPlanAgainstEmpty measures `rmqtopo plan --against empty` on a
// spec of RMQTOPO_BENCH_QUEUES work queues (default 150,000), each bound
// to a topic exchange with two delayed retries: load, expand, diff, check
// and render, no broker, in each output format. The command runs in a
// process of its own (this test binary, as testscript runs it) so that
// its peak RSS and CPU are its own; the goal for 150,000 queues is at
// most 10 s and 500 MB.
func BenchmarkPlanAgainstEmpty(b *testing.B) {
	queues := 150_000
	if v, err := strconv.Atoi(os.Getenv("RMQTOPO_BENCH_QUEUES")); err == nil && v > 0 {
		queues = v
	}
	path := writeBigSpec(b, queues)
	exe := selfAsRmqtopo(b)
	for _, format := range []string{"text", "json", "markdown"} {
		b.Run(format, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				u := runMeasured(b, exe, "--max-spec-size", "1GiB", "plan", "--format", format, "--against", "empty", path)
				b.ReportMetric(u.wall.Seconds(), "wall-s")
				b.ReportMetric(u.cpu.Seconds(), "cpu-s")
				b.ReportMetric(float64(u.peakRSS)/1e6, "peak-MB")
				verdict := "met"
				switch {
				case queues != 150_000:
					verdict = "not judged at this size"
				case u.wall > 10*time.Second || u.peakRSS > 500e6:
					verdict = "not met"
				}
				fmt.Fprintf(os.Stderr, "BenchmarkPlanAgainstEmpty/%s: %d queues: %.1f s wall, %.1f s CPU, peak RSS %.0f MB; goal (150,000 queues) <= 10 s and <= 500 MB: %s\n",
					format, queues, u.wall.Seconds(), u.cpu.Seconds(), float64(u.peakRSS)/1e6, verdict)
			}
		})
	}
}

// writeBigSpec writes the spec of BenchmarkPlanAgainstEmpty and returns
// its path.
func writeBigSpec(b *testing.B, queues int) string {
	var sb strings.Builder
	sb.WriteString("version: 1\nname: big\nexchanges:\n  - {name: biz, type: topic}\nqueues:\n")
	for i := 0; i < queues; i++ {
		fmt.Fprintf(&sb, "  - name: svc%06d.work\n    bindings: [{exchange: biz, routing_key: \"k.%d\"}]\n    retry: {delays: [1s, 5s]}\n", i, i)
	}
	path := filepath.Join(b.TempDir(), "big.yaml")
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}

// selfAsRmqtopo returns a link named rmqtopo to this test binary, which
// TestMain then runs as the CLI.
func selfAsRmqtopo(b *testing.B) string {
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	link := filepath.Join(b.TempDir(), "rmqtopo")
	if err := os.Symlink(self, link); err != nil {
		b.Fatal(err)
	}
	return link
}

// usage is what one command used: wall time, user + system CPU, peak RSS
// in bytes.
type usage struct {
	wall, cpu time.Duration
	peakRSS   int64
}

// runMeasured runs exe with args, its output discarded, and returns what
// it used.
func runMeasured(b *testing.B, exe string, args ...string) usage {
	cmd := exec.Command(exe, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	wall := time.Since(start)
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		b.Skip("no rusage on this platform")
	}
	return usage{wall: wall, cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), peakRSS: ru.Maxrss << 10}
}
