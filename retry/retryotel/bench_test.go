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
// (15, or $RMQTOPO_BENCH_ROUNDS), each round in a new order so that a
// drifting machine load affects them alike:
//
//   - off: without the option;
//   - sampled: with retryotel's option, every span sampled (AlwaysSample)
//     and handed to a batch span processor whose exporter drops them,
//     metrics into a manual reader;
//   - unsampled: with the option and no span sampled (NeverSample),
//     metrics as before.
//
// Two workloads: ack (every handler succeeds: the cheapest settlement, so
// the one where tracing weighs most) and retry (every handler fails: a
// retry copy, confirmed, into a wait queue of 1h). Each variant reports
// its median msg/s and client CPU µs per message over rounds, and the
// traced ones x-off: the median over rounds of their rate over off's in
// the same round. The goals are 0.9 (sampled) and 0.98 (unsampled).
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
	variants := []string{"off", "sampled", "unsampled"}
	rates, cpus, ratios := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
	for round := range benchRounds() {
		k := round % len(variants)
		got := map[string]float64{}
		for _, v := range append(slices.Clone(variants[k:]), variants[:k]...) {
			rate, cpu := e.consumeRate(b, n, herr, benchOption(v))
			got[v] = rate
			rates[v], cpus[v] = append(rates[v], rate), append(cpus[v], cpu)
		}
		for _, v := range variants[1:] {
			ratios[v] = append(ratios[v], got[v]/got["off"])
		}
	}
	for _, v := range variants {
		b.Logf("%-9s median %5.0f msg/s, %5.1f client-cpu-µs/msg; %d rounds of %d messages: %.0f msg/s; x-off by round %.2f",
			v, median(rates[v]), median(cpus[v]), len(rates[v]), n, rates[v], ratios[v])
		b.ReportMetric(median(rates[v]), v+"-msg/s")
		b.ReportMetric(median(cpus[v]), v+"-cpu-µs/msg")
	}
	b.ReportMetric(median(ratios["sampled"]), "sampled-x-off")
	b.ReportMetric(median(ratios["unsampled"]), "unsampled-x-off")
	b.ReportMetric(median(cpus["sampled"])-median(cpus["off"]), "sampled-extra-cpu-µs/msg")
	b.ReportMetric(median(cpus["unsampled"])-median(cpus["off"]), "unsampled-extra-cpu-µs/msg")
}

// benchOption is a variant's option: none for off.
func benchOption(v string) retry.Option {
	sampler := sdktrace.AlwaysSample()
	switch v {
	case "off":
		return nil
	case "unsampled":
		sampler = sdktrace.NeverSample()
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}), sdktrace.WithSampler(sampler))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	return retryotel.New(retryotel.WithTracerProvider(tp), retryotel.WithMeterProvider(mp)).Option()
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

func benchRounds() int {
	if v, err := strconv.Atoi(os.Getenv("RMQTOPO_BENCH_ROUNDS")); err == nil && v > 0 {
		return v
	}
	return 15
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
