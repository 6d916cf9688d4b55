package retryotel_test

// BenchmarkConsumeTracing measures what tracing costs retry.Consume. Run it
// with make bench, or
//
//	go test ./retry/retryotel/ -run '^$' -bench ConsumeTracing -benchtime 1x -v
//
// Figures from the project's machine are in docs/benchmarks.md.

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
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
	rates, cpus, ratios := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
	for round := range benchRounds() {
		k := round % len(variants)
		order := append(slices.Clone(variants[k:]), variants[:k]...)
		back := slices.Clone(order)
		slices.Reverse(back)
		got, cpu := map[string]float64{}, map[string]float64{}
		for _, v := range append(order, back...) {
			opt, shutdown := benchOption(v)
			r, c := e.consumeRate(b, n, herr, opt)
			shutdown()
			got[v], cpu[v] = got[v]+r/2, cpu[v]+c/2
		}
		for _, v := range variants {
			rates[v], cpus[v] = append(rates[v], got[v]), append(cpus[v], cpu[v])
		}
		for _, v := range variants {
			if v != "off" && got["off"] > 0 {
				ratios[v] = append(ratios[v], got[v]/got["off"])
			}
		}
	}
	reportTracing(b, variants, n, rates, cpus, ratios)
}

func reportTracing(b *testing.B, variants []string, n int, rates, cpus, ratios map[string][]float64) {
	for _, v := range variants {
		b.Logf("%-9s median %5.0f msg/s, %5.1f client-cpu-µs/msg; %d rounds of 2x%d messages: %.0f msg/s; x-off by round %.2f",
			v, median(rates[v]), median(cpus[v]), len(rates[v]), n, rates[v], ratios[v])
		b.ReportMetric(median(rates[v]), v+"-msg/s")
		b.ReportMetric(median(cpus[v]), v+"-cpu-µs/msg")
	}
	for _, v := range variants {
		if v == "off" || len(ratios[v]) == 0 {
			continue
		}
		b.Logf("%-9s x-off median %.3f, quartiles %.3f–%.3f, min–max %.2f–%.2f",
			v, median(ratios[v]), quantile(ratios[v], .25), quantile(ratios[v], .75),
			slices.Min(ratios[v]), slices.Max(ratios[v]))
		b.ReportMetric(median(ratios[v]), v+"-x-off")
		b.ReportMetric(median(cpus[v])-median(cpus["off"]), v+"-extra-cpu-µs/msg")
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

// consumeRate prefills n messages, runs Consume over them, and returns its
// rate from the first settlement to the last (no dialing in it), and the
// process's CPU time per message meanwhile, in µs.
func (e *env) consumeRate(b *testing.B, n int, herr error, opt retry.Option) (rate, cpuMicros float64) {
	e.prefill(b, n)
	var settled atomic.Int64
	var first atomic.Int64
	done := make(chan time.Time, 1)
	var cpu0 time.Duration
	count := &settleCounter{f: func() {
		k := settled.Add(1)
		if k == 1 {
			first.Store(time.Now().UnixNano())
			cpu0 = cpuTime()
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
	var cpu time.Duration
	select {
	case end = <-done:
		cpu = cpuTime() - cpu0
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
	return float64(n-1) / end.Sub(time.Unix(0, first.Load())).Seconds(), float64(cpu.Microseconds()) / float64(n-1)
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
