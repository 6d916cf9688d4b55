package retry_test

// Benchmarks against the harness's broker (or the one RMQTOPO_TEST_URL and
// RMQTOPO_TEST_AMQP_URL name). Run them with
//
//	go test ./retry/ -run '^$' -bench . -benchtime 1x        # what make bench runs
//	go test ./retry/ -run '^$' -bench Throughput -benchtime 1x -count 5
//	RMQTOPO_BENCH_DELAYS=100ms,1s,4s go test ./retry/ -run '^$' -bench Lateness -benchtime 1x -v
//
// Run without RMQTOPO_TEST_URL, the harness starts a node of its own and
// the throughput benchmark reports the broker's CPU time per message too.
//
// Figures from the project's machine are in docs/benchmarks.md.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/retry"
)

// benchPrefetch is the consumer prefetch of every throughput variant, so
// that only the retry path differs between them.
const benchPrefetch = 64

// benchMessages is the least number of messages one throughput
// measurement settles ($RMQTOPO_BENCH_MESSAGES overrides it), so that
// -benchtime 1x, as make bench runs it, still measures a rate.
func benchMessages(b *testing.B) int {
	n := 3000
	if v, err := strconv.Atoi(os.Getenv("RMQTOPO_BENCH_MESSAGES")); err == nil && v > 0 {
		n = v
	}
	return max(n, b.N)
}

// BenchmarkRetryThroughput measures the retry path: a delivery fails, a
// copy goes to the retry exchange with publisher confirms, the original is
// acked. The copies land in a wait queue with a one-hour TTL.
//
//   - raw: a plain amqp091 loop, one message at a time: publish with
//     confirm, wait for it, ack.
//   - helper-1: the retry helper with one handler.
//   - helper-8: the retry helper with eight concurrent handlers sharing its
//     confirm channel (pipelined confirmations).
//
// Each reports msg/s; helper-1 reports x-raw, its rate over the raw loop's,
// and x-raw-same-headers, over a raw loop whose copies carry the contract's
// four failure headers as the helper's do; helper-8 reports x-helper-1, its
// rate over one handler's. Each is measured in alternating blocks.
func BenchmarkRetryThroughput(b *testing.B) {
	for _, mode := range []struct {
		name string
		dm   uint8
	}{{"transient", amqp.Transient}, {"persistent", amqp.Persistent}} {
		b.Run(mode.name, func(b *testing.B) { benchRetryThroughput(b, mode.dm) })
	}
}

func benchRetryThroughput(b *testing.B, deliveryMode uint8) {
	e := newEnv(b, topo{layout: "per-attempt", queueType: "classic", delays: []string{"1h"}}, nil)
	wait := contract.PerAttemptWaitQueue(workQueue, 1, time.Hour)

	// measure puts n messages in the work queue, then times handlers
	// goroutines settling them all with handle. Only the settling runs
	// under b's timer when timed is set.
	measure := func(b *testing.B, n, handlers int, timed bool, handle func(amqp.Delivery)) (rate float64, cpuPerMsg, brokerPerMsg time.Duration) {
		e.prefill(b, n, deliveryMode)
		ch, err := e.conn.Channel()
		if err != nil {
			b.Fatal(err)
		}
		defer ch.Close()
		if err := ch.Qos(benchPrefetch, 0, false); err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		left := n
		done := make(chan struct{})
		if timed {
			b.StartTimer()
		}
		start := time.Now()
		cpu0, bcpu0 := cpuTime(), e.brokerCPU()
		deliveries, err := ch.Consume(workQueue, "", false, false, false, false, nil)
		if err != nil {
			b.Fatal(err)
		}
		for range handlers {
			wg.Go(func() {
				for d := range deliveries {
					handle(d)
					mu.Lock()
					left--
					if left == 0 {
						close(done)
					}
					mu.Unlock()
				}
			})
		}
		select {
		case <-done:
		case <-time.After(5 * time.Minute):
			b.Fatalf("%d of %d messages left", left, n)
		}
		elapsed := time.Since(start)
		cpu, bcpu := cpuTime()-cpu0, e.brokerCPU()-bcpu0
		if timed {
			b.StopTimer()
		}
		ch.Close()
		wg.Wait()
		if _, err := e.purge(b, wait); err != nil {
			b.Fatal(err)
		}
		return float64(n) / elapsed.Seconds(), cpu / time.Duration(n), bcpu / time.Duration(n)
	}
	report := func(b *testing.B, rate float64, cpu, bcpu time.Duration) {
		b.ReportMetric(1e9/rate, "ns/op") // per message, whatever b.N
		b.ReportMetric(rate, "msg/s")
		b.ReportMetric(float64(cpu.Nanoseconds())/1e3, "client-cpu-µs/msg")
		if bcpu > 0 {
			b.ReportMetric(float64(bcpu.Nanoseconds())/1e3, "broker-cpu-µs/msg")
		}
	}

	pub, err := e.conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	defer pub.Close()
	if err := pub.Confirm(false); err != nil {
		b.Fatal(err)
	}
	// rawWith is the raw loop; extra headers, if any, go on every copy.
	rawWith := func(extra amqp.Table) func(amqp.Delivery) {
		return func(d amqp.Delivery) { rawRetry(b, pub, d, extra) }
	}
	raw := rawWith(nil)
	// rawContract carries the contract's failure headers, as many as the
	// helper's copies: the same work on the wire and in the broker.
	rawContract := rawWith(amqp.Table{
		contract.HeaderFirstFailure: time.Now().UTC().Format(time.RFC3339Nano), contract.HeaderLastError: errFail.Error(),
		contract.HeaderOriginalExchange: bizExchange, contract.HeaderOriginalRoutingKey: bizKey,
	})

	b.Run("raw", func(b *testing.B) {
		b.StopTimer()
		rate, cpu, bcpu := measure(b, benchMessages(b), 1, true, raw)
		report(b, rate, cpu, bcpu)
	})
	// Each helper variant alternates, block by block, with the variant it
	// is compared with (helper-1 with raw, helper-8 with helper-1), so that
	// a machine whose load drifts from second to second weighs on both
	// alike; the ratio is of their rates over all the blocks.
	alternate := func(b *testing.B, n int, x func(amqp.Delivery), xHandlers int, ys ...func(amqp.Delivery)) (xRate float64, ratios []float64, cpu, bcpu time.Duration) {
		const blocks = 6
		per := max(n/blocks, 1)
		xTime, yTimes := 0.0, make([]float64, len(ys))
		runX := func() {
			r, c, bc := measure(b, per, xHandlers, false, x)
			xTime += float64(per) / r
			cpu, bcpu = cpu+c/blocks, bcpu+bc/blocks
		}
		runYs := func() {
			for i, y := range ys {
				r, _, _ := measure(b, per, 1, false, y)
				yTimes[i] += float64(per) / r
			}
		}
		for i := range blocks { // who goes first alternates too
			if i%2 == 0 {
				runX()
				runYs()
			} else {
				runYs()
				runX()
			}
		}
		for _, yt := range yTimes {
			ratios = append(ratios, yt/xTime)
		}
		return float64(per*blocks) / xTime, ratios, cpu, bcpu
	}
	b.Run("helper-1", func(b *testing.B) {
		b.StopTimer()
		rate, ratios, cpu, bcpu := alternate(b, benchMessages(b), helperHandler(b, e), 1, raw, rawContract)
		report(b, rate, cpu, bcpu)
		b.ReportMetric(ratios[0], "x-raw")
		b.ReportMetric(ratios[1], "x-raw-same-headers")
	})
	b.Run("helper-8", func(b *testing.B) {
		b.StopTimer()
		helper := helperHandler(b, e)
		rate, ratios, cpu, bcpu := alternate(b, benchMessages(b), helper, 8, helper)
		report(b, rate, cpu, bcpu)
		b.ReportMetric(ratios[0], "x-helper-1")
	})
}

// rawRetry is the raw amqp091 loop's settling of one delivery: a copy with
// the next attempt (and extra headers) to the retry exchange, wait for the
// confirm, ack.
func rawRetry(b *testing.B, pub *amqp.Channel, d amqp.Delivery, extra amqp.Table) {
	h := amqp.Table{}
	for k, v := range d.Headers {
		h[k] = v
	}
	for k, v := range extra {
		h[k] = v
	}
	h[contract.HeaderAttempt] = contract.AttemptValue(2) // the first retry
	dc, err := pub.PublishWithDeferredConfirmWithContext(context.Background(), contract.RetryExchange(workQueue), workQueue, true, false,
		amqp.Publishing{Headers: h, ContentType: d.ContentType, DeliveryMode: d.DeliveryMode, MessageId: d.MessageId, Body: d.Body})
	if err != nil {
		b.Error(err)
		return
	}
	if !dc.Wait() {
		b.Error("nack")
		return
	}
	if err := d.Ack(false); err != nil {
		b.Error(err)
	}
}

// helperHandler settles each delivery as a failure through a Retrier.
func helperHandler(b *testing.B, e *env) func(amqp.Delivery) {
	r := newRetrier(b, e, retry.WithLogger(discardLogger()))
	process := r.Handle(func(context.Context, amqp.Delivery) error { return errFail })
	return func(d amqp.Delivery) {
		if out, err := process(context.Background(), d); out != retry.Retried || err != nil {
			b.Errorf("outcome %v, %v", out, err)
		}
	}
}

var errFail = errors.New("fail")

// brokerCPU is the CPU time the harness's private node has used, or 0 for
// an external broker.
func (e *env) brokerCPU() time.Duration {
	if e.b.Node == nil {
		return 0
	}
	pid, err := e.b.Node.PID()
	if err != nil {
		return 0
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command (which may hold spaces) in parentheses;
	// utime and stime are the 14th and 15th fields, in clock ticks.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / ticksPerSecond
}

// cpuTime is the CPU time this process has used, user and system: the
// client side's cost (the broker's is not counted).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// prefill puts n messages in the work queue, pipelining confirms.
func (e *env) prefill(tb testing.TB, n int, deliveryMode uint8) {
	tb.Helper()
	msgs := make([]amqp.Publishing, n)
	for i := range msgs {
		msgs[i] = amqp.Publishing{
			MessageId: strconv.Itoa(i), ContentType: "application/json", DeliveryMode: deliveryMode,
			Headers: amqp.Table{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
			Body:    []byte(`{"order":12345,"items":[1,2,3]}`),
		}
	}
	e.publishMany(tb, bizExchange, bizKey, msgs)
}

func (e *env) purge(tb testing.TB, queue string) (int, error) {
	ch, err := e.conn.Channel()
	if err != nil {
		return 0, err
	}
	defer ch.Close()
	return ch.QueuePurge(queue, false)
}

// BenchmarkReturnLateness publishes bursts of 10,000 messages spread
// round-robin over a set of delays (100ms, 200ms, 400ms unless
// $RMQTOPO_BENCH_DELAYS says otherwise, see benchDelays) into five wait
// layouts, and measures how late each comes back: arrival minus (publish
// time + delay). The layouts take turns, burst after burst, for 5 rounds
// ($RMQTOPO_BENCH_ROUNDS), so that a drifting machine load affects them
// alike. Each reports the median over rounds of its per-burst p50 and p99
// lateness in ms, its overall max, its mean time to publish a burst (with
// all confirms), and for the rmqtopo layouts p99-x-bare: the median over
// rounds of its p99 over the bare per-queue-TTL p99 of the same round; the
// quorum layout p99-x-bare-quorum, the same over bare quorum queues.
//
//   - bare-queue-ttl: one classic queue per delay with x-message-ttl,
//     published to through the default exchange, dead-lettering back to the
//     work queue: the best a TTL wait queue can do.
//   - bare-queue-ttl-quorum: the same with quorum queues carrying the
//     arguments rmqtopo gives its quorum wait queues (at-least-once
//     dead-lettering, reject-publish), so that the quorum layout is
//     compared like for like.
//   - message-ttl: one classic queue, each message with its own expiration:
//     expiry happens only at the head of the queue, so short delays wait
//     behind long ones.
//   - rmqtopo-shared, rmqtopo-per-attempt: the provisioned topology (classic
//     wait queues), published to the way the helper does, through the
//     retry exchange with the attempt header.
//   - rmqtopo-shared-quorum: the shared layout with quorum wait queues, the
//     spec's default wait_queue_type (for information: replicated, fsynced).
func BenchmarkReturnLateness(b *testing.B) {
	const n = 10_000
	rounds := 5
	if v, err := strconv.Atoi(os.Getenv("RMQTOPO_BENCH_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	delays := benchDelays(b)
	specDelays := make([]string, len(delays))
	for i, d := range delays {
		specDelays[i] = contract.FormatDelay(d)
	}
	b.Logf("delays %s, %d rounds of %d messages", strings.Join(specDelays, ","), rounds, n)

	type variant struct {
		name          string
		e             *env
		exchange, key string
		headers       func(k int) amqp.Table // k: 0-based delay index
		expiration    func(k int) string
		p50, p99, x   []float64 // per round; x: p99 over bare's p99 that round
		xq            []float64 // per round: p99 over bare quorum's p99
		max           float64
		publish       time.Duration
	}
	bare := &variant{name: "bare-queue-ttl",
		e: newEnv(b, topo{layout: "per-attempt", queueType: "classic", delays: []string{"1h"}}, nil),
		headers: func(k int) amqp.Table {
			return amqp.Table{"bare-queue": "bare." + delays[k].String()} // routed by burst
		},
	}
	bare.e.declareBare(b, "bare.", delays, nil)
	bareQ := &variant{name: "bare-queue-ttl-quorum",
		e: newEnv(b, topo{layout: "per-attempt", queueType: "classic", delays: []string{"1h"}}, nil),
		headers: func(k int) amqp.Table {
			return amqp.Table{"bare-queue": "bareq." + delays[k].String()}
		},
	}
	bareQ.e.declareBare(b, "bareq.", delays, amqp.Table{"x-queue-type": "quorum",
		"x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish"})
	msgTTL := &variant{name: "message-ttl", key: "per-message-ttl",
		e:          newEnv(b, topo{layout: "per-attempt", queueType: "classic", delays: []string{"1h"}}, nil),
		expiration: func(k int) string { return strconv.FormatInt(delays[k].Milliseconds(), 10) },
	}
	args := amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": workQueue}
	if _, err := msgTTL.e.channel(b).QueueDeclare("per-message-ttl", true, false, false, false, args); err != nil {
		b.Fatal(err)
	}
	variants := []*variant{bare, bareQ, msgTTL}
	for _, x := range []struct{ name, layout, waitType string }{
		{"rmqtopo-shared", "shared", "classic"},
		{"rmqtopo-per-attempt", "per-attempt", "classic"},
		{"rmqtopo-shared-quorum", "shared", "quorum"}, // the spec's default wait queue type
	} {
		variants = append(variants, &variant{name: x.name,
			e: newEnv(b, topo{layout: x.layout, queueType: "classic", waitType: x.waitType,
				delays: specDelays}, nil),
			exchange: contract.RetryExchange(workQueue), key: workQueue,
			headers: func(k int) amqp.Table {
				return amqp.Table{contract.HeaderAttempt: contract.AttemptValue(k + 2)} // retry k+1
			},
		})
	}

	pct := func(late []time.Duration, p float64) float64 {
		return float64(late[int(p*float64(len(late)-1))]) / float64(time.Millisecond)
	}
	for r := range rounds {
		// Rotate who goes first, so no layout always follows a pause.
		for i := range variants {
			v := variants[(r+i)%len(variants)]
			late, pub := v.e.burst(b, workQueue, n, delays, v.exchange, v.key, v.headers, v.expiration)
			slices.Sort(late)
			v.p50 = append(v.p50, pct(late, 0.5))
			v.p99 = append(v.p99, pct(late, 0.99))
			v.max = max(v.max, pct(late, 1))
			v.publish += pub
		}
		for _, v := range variants {
			v.x = append(v.x, v.p99[r]/bare.p99[r])
			v.xq = append(v.xq, v.p99[r]/bareQ.p99[r])
		}
	}
	median := func(xs []float64) float64 {
		xs = slices.Clone(xs)
		slices.Sort(xs)
		if len(xs)%2 == 1 {
			return xs[len(xs)/2]
		}
		return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
	}
	for _, v := range variants {
		// The work is done; each sub-benchmark only reports its figures.
		b.Run(v.name, func(b *testing.B) {
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(median(v.p50), "p50-ms")
			b.ReportMetric(median(v.p99), "p99-ms")
			b.ReportMetric(v.max, "max-ms")
			b.ReportMetric(float64(v.publish.Milliseconds())/float64(rounds), "publish-ms")
			if v.exchange != "" {
				b.ReportMetric(median(v.x), "p99-x-bare")
			}
			if strings.HasSuffix(v.name, "quorum") && v != bareQ {
				b.ReportMetric(median(v.xq), "p99-x-bare-quorum")
			}
		})
		b.Logf("%s: p99 per round %.0f ms; x bare %.2f; x bare quorum %.2f", v.name, v.p99, v.x, v.xq)
	}
	// The goal, judged here since tests no longer bound a retry's
	// lateness (TestSchedule's 250 ms, internal/e2e's 3 s, the presets'
	// 1 s): rmqtopo's p99 within 1.2x of the bare per-queue-TTL layout of
	// the same type, by the median of the per-round ratios.
	for _, v := range variants {
		ratio, against := median(v.x), bare.name
		switch {
		case v.exchange == "":
			continue
		case strings.HasSuffix(v.name, "quorum"):
			ratio, against = median(v.xq), bareQ.name
		}
		verdict := "met"
		if ratio > 1.2 {
			verdict = "NOT met"
		}
		b.Logf("%s: p99 %.2fx %s's against goal 1.2x: %s", v.name, ratio, against, verdict)
	}
}

// declareBare declares one wait queue per delay, named prefix+delay, with
// a per-queue TTL and dead-lettering back to the work queue, and extra
// arguments.
func (e *env) declareBare(b *testing.B, prefix string, delays []time.Duration, extra amqp.Table) {
	ch := e.channel(b)
	for _, d := range delays {
		args := amqp.Table{"x-message-ttl": d.Milliseconds(), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": workQueue}
		for k, v := range extra {
			args[k] = v
		}
		if _, err := ch.QueueDeclare(prefix+d.String(), true, false, false, false, args); err != nil {
			b.Fatal(err)
		}
	}
}

// benchDelays is BenchmarkReturnLateness's delay set: 100ms,200ms,400ms, or
// the comma-separated durations in $RMQTOPO_BENCH_DELAYS (Go syntax, whole
// milliseconds), e.g. 100ms,1s,4s. Close delays hide most of per-message
// TTL's head-of-line blocking; a wide spread shows it. The default stays the
// set the recorded figures in docs/benchmarks.md were first measured with.
func benchDelays(tb testing.TB) []time.Duration {
	tb.Helper()
	v := strings.TrimSpace(os.Getenv("RMQTOPO_BENCH_DELAYS"))
	if v == "" {
		return []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}
	}
	var delays []time.Duration
	for f := range strings.SplitSeq(v, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		switch {
		case err != nil:
			tb.Fatalf("RMQTOPO_BENCH_DELAYS=%q: %v", v, err)
		case d <= 0 || d%time.Millisecond != 0:
			tb.Fatalf("RMQTOPO_BENCH_DELAYS=%q: %q is not a positive whole number of milliseconds", v, f)
		}
		delays = append(delays, d)
	}
	return delays
}

// burst consumes back (auto-ack) on a connection of its own, publishes n
// messages as fast as confirms allow, the i-th scheduled for
// delays[i%len(delays)], and returns how late each came back and how long
// publishing (with all confirms) took.
func (e *env) burst(b *testing.B, back string, n int, delays []time.Duration, exchange, key string,
	headers func(int) amqp.Table, expiration func(int) string) (late []time.Duration, publish time.Duration) {
	b.Helper()
	cconn := e.b.Dial(b, e.vhost)
	defer cconn.Close()
	cch, err := cconn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	deliveries, err := cch.Consume(back, "", true, false, false, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	late = make([]time.Duration, 0, n)
	got := make(chan struct{})
	go func() {
		defer close(got)
		for d := range deliveries {
			due, _ := d.Headers["due"].(int64)
			late = append(late, time.Duration(time.Now().UnixNano()-due))
			if len(late) == n {
				return
			}
		}
	}()

	pch, err := e.conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	defer pch.Close()
	if err := pch.Confirm(false); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	dcs := make([]*amqp.DeferredConfirmation, 0, n)
	pubStart := time.Now()
	for i := range n {
		k := i % len(delays)
		h := amqp.Table{}
		if headers != nil {
			h = headers(k)
		}
		rk := key
		if q, ok := h["bare-queue"].(string); ok {
			rk = q
		}
		msg := amqp.Publishing{Headers: h, Body: []byte("x")}
		if expiration != nil {
			msg.Expiration = expiration(k)
		}
		h["due"] = time.Now().Add(delays[k]).UnixNano()
		dc, err := pch.PublishWithDeferredConfirmWithContext(ctx, exchange, rk, true, false, msg)
		if err != nil {
			b.Fatal(err)
		}
		dcs = append(dcs, dc)
	}
	for _, dc := range dcs {
		if !dc.Wait() {
			b.Fatal("nack")
		}
	}
	publish = time.Since(pubStart)
	select {
	case <-got:
	case <-time.After(2 * time.Minute):
		b.Fatalf("%d of %d messages came back", len(late), n)
	}
	return late, publish
}
