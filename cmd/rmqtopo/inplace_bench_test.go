package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/rabbitmq"
	rtry "github.com/rmqtopo/rmqtopo/retry"
)

// BenchmarkNativeScheduleChange measures issue 46's goal for a schedule
// change on a native queue: applied in place (a policy and a binding, no
// replace) while the queue holds RMQTOPO_BENCH_HELD retries (default
// "0,100,1000": the baseline without any, then two sizes), it completes
// in at most 2 s, and every held retry comes back no earlier and at most
// 1 s later than it was due before the change. It prints the apply's
// time against the baseline's, measured in the same run, and the held
// retries' lateness (p50, p99, worst). Each size runs once whatever b.N
// is; run it with -benchtime 1x.
func BenchmarkNativeScheduleChange(b *testing.B) {
	o := newOnline(b)
	if v := o.b.Version(b); !nativeRelease(v) {
		b.Skipf("RabbitMQ %s: the native layout needs 4.3.1", v)
	}
	for _, shape := range scheduleShapes {
		var base time.Duration
		for _, n := range envSizes(b, "RMQTOPO_BENCH_HELD", []int{0, 100, 1000}) {
			took, late, early := scheduleChangeRound(b, shape, n)
			if n == 0 {
				base = took
			}
			reportScheduleChange(b, shape, n, took, base, late, early)
		}
	}
}

// scheduleShape is a native queue's shape under BenchmarkNativeScheduleChange.
type scheduleShape struct {
	name string
	// spec is the queue's spec with its delays left to fill; before and
	// after the change's delays, the first of each delay.
	spec, before, after string
	delay               time.Duration
	// hold holds n retries in "orders" and returns when each is due.
	hold func(b *testing.B, o *online, conn *amqp.Connection, n int, delay time.Duration) map[string]time.Time
}

// scheduleShapes: the policy shape (a queue with an attribute, on the
// reject route) and the binding shape (no attribute, the modified route:
// retry.Consume holds the retries over AMQP 1.0).
var scheduleShapes = []scheduleShape{
	{"policy", inPlaceSpec, "20s, 20s", "20s, 30s", 20 * time.Second,
		func(b *testing.B, _ *online, conn *amqp.Connection, n int, d time.Duration) map[string]time.Time {
			return rejectHeld(b, conn, n, d)
		}},
	{"binding", bindingSpec, "20s, 45s", "20s, 30s", 20 * time.Second, consumeHeld},
}

// reportScheduleChange prints one round of BenchmarkNativeScheduleChange.
func reportScheduleChange(b *testing.B, shape scheduleShape, n int, took, base time.Duration, late []time.Duration, early int) {
	ratio := took.Seconds() / max(base.Seconds(), 1e-3)
	fmt.Fprintf(os.Stderr, "BenchmarkNativeScheduleChange %s shape, %d held retries: apply %.2fs (%.2f x the apply with none held; goal <= 2s: %s)",
		shape.name, n, took.Seconds(), ratio, verdictOf(took <= 2*time.Second))
	if n > 0 {
		fmt.Fprintf(os.Stderr, "; back after due: p50 %s, p99 %s, worst %s (goal <= 1s: %s), early %d (goal 0: %s)",
			pct(late, 50), pct(late, 99), pct(late, 100), verdictOf(pct(late, 100) <= time.Second), early, verdictOf(early == 0))
	}
	fmt.Fprintln(os.Stderr)
	b.ReportMetric(took.Seconds(), fmt.Sprintf("apply-s-%s-%d", shape.name, n))
}

// scheduleChangeRound holds n retries in a native queue of a vhost of its
// own, changes the schedule in place, and returns the apply's time, each
// held retry's lateness against the time it was due, and how many came
// back early.
func scheduleChangeRound(b *testing.B, shape scheduleShape, n int) (took time.Duration, late []time.Duration, early int) {
	o := newOnline(b)
	// The first delay is long enough that holding 1,000 retries ends
	// before the first is due.
	o.must(b, 0, "apply", "--auto-approve", o.spec(b, "before.yaml", fmt.Sprintf(shape.spec, shape.before)))
	conn := o.b.Dial(b, o.vhost)
	due := shape.hold(b, o, conn, n, shape.delay)
	after := o.spec(b, "after.yaml", fmt.Sprintf(shape.spec, shape.after))
	start := time.Now()
	o.must(b, 0, "apply", "--auto-approve", after)
	took = time.Since(start)
	if n == 0 {
		return took, nil, 0
	}
	ch, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Qos(200, 0, false); err != nil {
		b.Fatal(err)
	}
	ds, err := ch.Consume("orders", "bench", false, false, false, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	guard := time.After(time.Until(latest(due)) + waitguard.For(10*time.Second))
	for range n {
		select {
		case d := <-ds:
			at := time.Now()
			l := at.Sub(due[d.MessageId])
			// Early is before the broker's millisecond: it keeps due times
			// in whole milliseconds.
			if l < -time.Millisecond {
				early++
			}
			late = append(late, l)
			if err := d.Ack(false); err != nil {
				b.Fatal(err)
			}
		case <-guard:
			b.Fatalf("%d of %d held retries came back", len(late), n)
		}
	}
	return took, late, early
}

// rejectHeld publishes n messages to "orders", takes them with a consumer
// and rejects each with requeue as it arrives, as retry.Consume does on the
// reject route: the broker holds n retries. It returns when each is due.
func rejectHeld(b *testing.B, conn *amqp.Connection, n int, delay time.Duration) map[string]time.Time {
	due := map[string]time.Time{}
	if n == 0 {
		return due
	}
	for i := range n {
		brokertest.PublishConfirmed(b, conn, "", "orders", amqp.Publishing{MessageId: fmt.Sprintf("held-%d", i), DeliveryMode: amqp.Persistent})
	}
	ch, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Qos(n, 0, false); err != nil {
		b.Fatal(err)
	}
	ds, err := ch.Consume("orders", "hold", false, false, false, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	guard := time.After(waitguard.For(10 * time.Second))
	for len(due) < n {
		select {
		case d := <-ds:
			sent := time.Now() // the broker cannot start the delay before the reject is sent
			if err := d.Reject(true); err != nil {
				b.Fatal(err)
			}
			due[d.MessageId] = sent.Add(delay)
		case <-guard:
			b.Fatalf("held %d of %d retries", len(due), n)
		}
	}
	return due
}

// latest is the latest of the times in m.
func latest(m map[string]time.Time) time.Time {
	var out time.Time
	for _, t := range m {
		if t.After(out) {
			out = t
		}
	}
	return out
}

// pct is the p-th percentile of ds (100: the largest), rounded to ms.
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := min(len(s)-1, (len(s)*p+99)/100-1)
	return s[max(i, 0)].Round(time.Millisecond)
}

func verdictOf(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}

// nativeRelease reports whether RabbitMQ version v runs the native layout.
func nativeRelease(v string) bool {
	p, _ := rabbitmq.ProfileOf(v)
	return p.NativeDelayedRetry()
}

// envSizes reads a comma-separated list of sizes from the environment.
func envSizes(tb testing.TB, name string, def []int) []int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil {
			tb.Fatalf("%s: %q is not a number", name, f)
		}
		out = append(out, n)
	}
	return out
}

// consumeHeld publishes n messages to "orders" and runs retry.Consume
// until its handler has failed each once: on the modified route the
// helper holds each retry inside the queue for delay, over AMQP 1.0. It
// returns when each is due (counted from the handler's failure: the
// helper's delivery time is set after it).
func consumeHeld(b *testing.B, o *online, conn *amqp.Connection, n int, delay time.Duration) map[string]time.Time {
	due := map[string]time.Time{}
	if n == 0 {
		return due
	}
	for i := range n {
		brokertest.PublishConfirmed(b, conn, "", "orders", amqp.Publishing{MessageId: fmt.Sprintf("held-%d", i), DeliveryMode: amqp.Persistent})
	}
	var mu sync.Mutex
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- rtry.Consume(ctx, rtry.DialURL(o.b.AMQPURLFor(o.vhost), amqp.Config{}), "orders",
			func(_ context.Context, d amqp.Delivery) error {
				mu.Lock()
				defer mu.Unlock()
				due[d.MessageId] = time.Now().Add(delay)
				return fmt.Errorf("held")
			}, rtry.WithPrefetch(200))
	}()
	guard := time.Now().Add(waitguard.For(10 * time.Second))
	for {
		mu.Lock()
		got := len(due)
		mu.Unlock()
		if got == n {
			break
		}
		if time.Now().After(guard) {
			cancel()
			b.Fatalf("held %d of %d retries", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return maps.Clone(due)
}
