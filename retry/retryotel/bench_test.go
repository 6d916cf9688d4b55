package retryotel_test

// BenchmarkConsumeTracing measures what tracing costs retry.Consume. Run it
// with make bench, or
//
//	go test ./retry/retryotel/ -run '^$' -bench ConsumeTracing -benchtime 1x -v
//
// Figures from the project's machine are in docs/benchmarks.md.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/rmqtopo/rmqtopo/retry"
	"github.com/rmqtopo/rmqtopo/retry/retryotel"
)

// BenchmarkConsumeTracing runs retry.Consume (prefetch 16) over a
// prefilled queue, in three variants side by side, round after round
// (15, or $RMQTOPO_BENCH_ROUNDS). A round runs each variant twice, in an
// order and then its reverse (ABCCBA), each round starting with the next
// variant: a load that drifts linearly through a round weighs on every
// variant alike, and no variant always follows the same one.
//
//   - off: without the option;
//   - sampled: with retryotel's option, every span sampled (AlwaysSample)
//     and handed to a batch span processor, as a service's would be,
//     whose exporter drops them (the export itself, an OTLP encoding and
//     a send, is the exporter's cost, not the helper's), metrics into a
//     manual reader;
//   - unsampled: with the option and no span sampled (NeverSample),
//     metrics as before.
//
// Each block starts from the same queue state: n messages ready, nothing
// else in the vhost. The providers of a block are shut down after it.
//
// Two workloads: ack (every handler succeeds: the cheapest settlement, so
// the one where tracing weighs most) and retry (every handler fails: a
// retry copy, confirmed, into a wait queue of 1h). Each variant reports
// its median msg/s and client CPU µs per message over rounds, and the
// traced ones x-off: the median over rounds of their rate over off's in
// the same round (a variant's rate in a round: the mean of its two
// blocks'). The goals are 0.9 (sampled) and 0.98 (unsampled).
func BenchmarkConsumeTracing(b *testing.B) {
	for _, w := range []struct {
		name string
		err  error
	}{{"ack", nil}, {"retry", fmt.Errorf("failed")}} {
		b.Run(w.name, func(b *testing.B) { benchConsumeTracing(b, w.err) })
	}
}

func benchConsumeTracing(b *testing.B, herr error) {
	e := newEnv(b, "    retry: {delays: [1h]}\n")
	n := benchMessages(herr)
	variants := benchVariants()
	for _, v := range variants {
		if !slices.Contains([]string{"off", "sampled", "unsampled"}, v) {
			b.Fatalf("RMQTOPO_BENCH_VARIANTS: no variant %q (off, sampled, unsampled)", v)
		}
	}
	r := results{rate: map[string][]float64{}, client: map[string][]float64{}, broker: map[string][]float64{},
		allocs: map[string][]float64{}, xoff: map[string][]float64{}, cpuXoff: map[string][]float64{}}
	for round := range benchRounds() {
		k := round % len(variants)
		order := append(slices.Clone(variants[k:]), variants[:k]...)
		back := slices.Clone(order)
		slices.Reverse(back)
		got := map[string]block{}
		for _, v := range append(order, back...) {
			opt, shutdown := benchOption(v)
			m := e.consumeBlock(b, n, herr, opt)
			shutdown()
			g := got[v]
			got[v] = block{g.rate + m.rate/2, g.client + m.client/2, g.broker + m.broker/2, g.allocs + m.allocs/2}
		}
		r.add(got)
	}
	r.report(b, variants, n)
}

// block is one measurement, or a round's mean of a variant's two: msg/s,
// the client's and the broker's CPU µs per message, and the client's heap
// allocations per message (a count: steady under any load).
type block struct{ rate, client, broker, allocs float64 }

// results are a run's blocks by variant, round after round, and the
// traced variants' ratios to off in each round: of rates (xoff), and of
// CPU per message, client and broker together (cpuXoff: the rate ratio
// a machine whose CPU is the bottleneck would see; 0 without the
// broker's CPU).
type results struct {
	rate, client, broker, allocs, xoff, cpuXoff map[string][]float64
}

func (r *results) add(got map[string]block) {
	off, hasOff := got["off"]
	for v, m := range got {
		r.rate[v] = append(r.rate[v], m.rate)
		r.client[v] = append(r.client[v], m.client)
		r.broker[v] = append(r.broker[v], m.broker)
		r.allocs[v] = append(r.allocs[v], m.allocs)
		if v == "off" || !hasOff {
			continue
		}
		r.xoff[v] = append(r.xoff[v], m.rate/off.rate)
		if m.broker > 0 {
			r.cpuXoff[v] = append(r.cpuXoff[v], (off.client+off.broker)/(m.client+m.broker))
		}
	}
}

func (r *results) report(b *testing.B, variants []string, n int) {
	for _, v := range variants {
		b.Logf("%-9s median %5.0f msg/s, CPU µs/msg client %5.1f broker %5.1f, client allocs/msg %.1f; %d rounds of 2x%d messages: %.0f msg/s",
			v, median(r.rate[v]), median(r.client[v]), median(r.broker[v]), median(r.allocs[v]), len(r.rate[v]), n, r.rate[v])
		b.ReportMetric(median(r.rate[v]), v+"-msg/s")
		b.ReportMetric(median(r.client[v]), v+"-cpu-µs/msg")
	}
	for _, v := range variants {
		if len(r.xoff[v]) == 0 {
			continue
		}
		b.Logf("%-9s x-off median %.3f, quartiles %.3f–%.3f, min–max %.2f–%.2f; by round %.2f",
			v, median(r.xoff[v]), quantile(r.xoff[v], .25), quantile(r.xoff[v], .75),
			slices.Min(r.xoff[v]), slices.Max(r.xoff[v]), r.xoff[v])
		b.ReportMetric(median(r.xoff[v]), v+"-x-off")
		b.ReportMetric(median(r.client[v])-median(r.client["off"]), v+"-extra-cpu-µs/msg")
		if len(r.cpuXoff[v]) > 0 {
			b.Logf("%-9s CPU x-off median %.3f, quartiles %.3f–%.3f", v,
				median(r.cpuXoff[v]), quantile(r.cpuXoff[v], .25), quantile(r.cpuXoff[v], .75))
			b.ReportMetric(median(r.cpuXoff[v]), v+"-cpu-x-off")
		}
	}
}

// benchOption is a variant's option (none for off), and what shuts its
// providers down.
func benchOption(v string) (retry.Option, func()) {
	sampler := sdktrace.AlwaysSample()
	switch v {
	case "off":
		return nil, func() {}
	case "unsampled":
		sampler = sdktrace.NeverSample()
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}), sdktrace.WithSampler(sampler))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	opt := retryotel.New(retryotel.WithTracerProvider(tp), retryotel.WithMeterProvider(mp)).Option()
	return opt, func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	}
}

// discard is a span exporter that drops every span.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// consumeBlock prefills n messages, runs Consume over them, and measures it
// from the first settlement to the last (no dialing in it): its rate, and
// the CPU time per message meanwhile of this process and of the broker.
func (e *env) consumeBlock(b *testing.B, n int, herr error, opt retry.Option) block {
	e.prefill(b, n)
	var settled atomic.Int64
	var first atomic.Int64
	done := make(chan time.Time, 1)
	var cpu0, bcpu0 time.Duration
	var mallocs0 uint64
	count := &settleCounter{f: func() {
		k := settled.Add(1)
		if k == 1 {
			first.Store(time.Now().UnixNano())
			cpu0, bcpu0, mallocs0 = cpuTime(), brokerCPU(), mallocs()
		}
		if k == int64(n) {
			done <- time.Now()
		}
	}}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	dial := retry.DialURL(e.b.AMQPURLFor(e.vhost), amqp.Config{})
	go func() {
		stopped <- retry.Consume(ctx, dial, queue, func(context.Context, amqp.Delivery) error { return herr },
			opt, retry.WithObserver(count), retry.WithPrefetch(16), retry.WithLogger(slog.New(slog.DiscardHandler)))
	}()
	var end time.Time
	var cpu, bcpu time.Duration
	var allocs uint64
	select {
	case end = <-done:
		cpu, bcpu, allocs = cpuTime()-cpu0, brokerCPU()-bcpu0, mallocs()-mallocs0
	case <-time.After(5 * time.Minute):
		b.Fatalf("%d of %d messages settled", settled.Load(), n)
	}
	cancel()
	if err := <-stopped; err != nil {
		b.Fatal(err)
	}
	if herr != nil {
		e.purgeWait(b)
	}
	perMsg := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(n-1) }
	return block{float64(n-1) / end.Sub(time.Unix(0, first.Load())).Seconds(), perMsg(cpu), perMsg(bcpu),
		float64(allocs) / float64(n-1)}
}

// mallocs is the number of heap allocations the process made so far.
func mallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

// brokerPID is the OS pid of the bench's broker node: the beam.smp
// started with the home of the node RMQTOPO_TEST_NODE_STATE names (make
// bench's own), 0 if there is none to be found (a broker elsewhere).
var brokerPID = sync.OnceValue(func() int {
	var node struct {
		Home string `json:"home"`
	}
	data, err := os.ReadFile(os.Getenv("RMQTOPO_TEST_NODE_STATE"))
	if err != nil || json.Unmarshal(data, &node) != nil || node.Home == "" {
		return 0
	}
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, c := range cmdlines {
		args, err := os.ReadFile(c)
		if err == nil && bytes.Contains(args, []byte("beam")) && bytes.Contains(args, []byte("\x00-home\x00"+node.Home+"\x00")) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(c)))
			return pid
		}
	}
	return 0
})

// brokerCPU is the broker node's CPU time so far, summed over its threads
// (schedstat: nanoseconds, where the rusage of another process is in
// clock ticks); 0 without its pid.
func brokerCPU() time.Duration {
	pid := brokerPID()
	if pid == 0 {
		return 0
	}
	stats, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var sum time.Duration
	for _, st := range stats {
		data, err := os.ReadFile(st)
		if f := strings.Fields(string(data)); err == nil && len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			sum += time.Duration(ns)
		}
	}
	return sum
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type settleCounter struct {
	retry.NopObserver
	f func()
}

func (c *settleCounter) Settled(retry.Settlement) { c.f() }

// prefill publishes n messages carrying a producer's context, pipelining
// confirms.
func (e *env) prefill(b *testing.B, n int) {
	ch, err := e.conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		b.Fatal(err)
	}
	var last *amqp.DeferredConfirmation
	for i := range n {
		last, err = ch.PublishWithDeferredConfirm("", queue, false, false, amqp.Publishing{
			MessageId: strconv.Itoa(i), ContentType: "application/json",
			Headers: amqp.Table{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
			Body:    []byte(`{"order":12345,"items":[1,2,3]}`),
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if ok, err := last.WaitContext(context.Background()); !ok || err != nil {
		b.Fatalf("prefill not confirmed: %v", err)
	}
}

// purgeWait empties the wait queues the retry workload filled.
func (e *env) purgeWait(b *testing.B) {
	ch, err := e.conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	defer ch.Close()
	qs, err := e.b.Mgmt(b).ListQueuesIn(e.vhost)
	if err != nil {
		b.Fatal(err)
	}
	for _, q := range qs {
		if q.Name != queue {
			if _, err := ch.QueuePurge(q.Name, false); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// benchMessages is the number of messages of one measurement
// ($RMQTOPO_BENCH_MESSAGES): 2000 acks, or 500 retries, each under a
// second here: short blocks side by side see the same load of a shared
// machine, and many rounds outvote the blocks that did not.
func benchMessages(herr error) int {
	if v, err := strconv.Atoi(os.Getenv("RMQTOPO_BENCH_MESSAGES")); err == nil && v > 1 {
		return v
	}
	if herr != nil {
		return 500
	}
	return 2000
}

// benchVariants are the variants measured: off, sampled and unsampled,
// or those $RMQTOPO_BENCH_VARIANTS names (comma-separated; one alone to
// profile it: -cpuprofile).
func benchVariants() []string {
	if v := os.Getenv("RMQTOPO_BENCH_VARIANTS"); v != "" {
		return strings.Split(v, ",")
	}
	return []string{"off", "sampled", "unsampled"}
}

func benchRounds() int {
	if v, err := strconv.Atoi(os.Getenv("RMQTOPO_BENCH_ROUNDS")); err == nil && v > 0 {
		return v
	}
	return 15
}

func median(xs []float64) float64 { return quantile(xs, .5) }

// quantile is xs's q-quantile, interpolated between the two nearest.
func quantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	pos := q * float64(len(s)-1)
	i := int(pos)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (pos-float64(i))*(s[i+1]-s[i])
}
