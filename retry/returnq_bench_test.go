package retry_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/retry"
	"github.com/rmqtopo/rmqtopo/spec"
)

// BenchmarkBacklogReturn measures how late delayed retries reach a handler
// behind a backlog (issue 29), today's design against the return queue,
// side by side in one run. 10,000 messages ($RMQTOPO_BENCH_BACKLOG) are
// queued before retry.Consume starts with a prefetch of 1 or 8 handlers,
// each spending 0.5 ms per message; one in five always fails and is
// retried after each delay of $RMQTOPO_BENCH_RETURN_DELAYS (1s,2s), then
// dead-lettered. The layouts are $RMQTOPO_BENCH_LAYOUTS (shared; also
// per-attempt, levels), on quorum queues; $RMQTOPO_BENCH_HANDLERS (1,8)
// picks the handler counts.
//
// Lateness is a retry's arrival at a handler minus (the moment its handler
// failed + its delay): the retry publish and confirm are in it. Drain is
// the time until every message's first attempt was handled, done until
// the last retry was. Each layout first measures its floor: retries with
// no backlog at all (floorLateness). Each pair prints a verdict: the
// issue's goal, p99 arrival within 1.2 × delay + 100 ms (lateness ≤
// 0.2 × delay + 100 ms), with the floor's p99 beside it, and the drain and
// done times against today's of the same run.
func BenchmarkBacklogReturn(b *testing.B) {
	n, delays := backlogSettings()
	layouts := []string{"shared"}
	if v := os.Getenv("RMQTOPO_BENCH_LAYOUTS"); v != "" {
		layouts = strings.Split(v, ",")
	}
	for _, layout := range layouts {
		floor := floorLateness(b, layout, delays[0])
		b.Run(layout+"/floor", func(b *testing.B) {
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(ms(percentile(floor, 0.5)), fmt.Sprintf("late-%s-p50-ms", delays[0]))
			b.ReportMetric(ms(percentile(floor, 0.99)), fmt.Sprintf("late-%s-p99-ms", delays[0]))
		})
		for k, handlers := range benchHandlers() {
			var runs [2]backlogRun
			// Every other pair runs the return queue first, so that a
			// machine growing busier does not always favour one design.
			order := []bool{false, true}
			if k%2 == 1 {
				order = []bool{true, false}
			}
			for _, rq := range order {
				i := 0
				if rq {
					i = 1
				}
				runs[i] = backlogRun{layout: layout, handlers: handlers, returnQueue: rq, n: n, delays: delays}
				runs[i].run(b)
				b.Run(runs[i].name(), func(b *testing.B) { runs[i].report(b) })
			}
			verdict(runs, percentile(floor, 0.99))
		}
	}
}

// backlogSettings are the backlog (10,000, or $RMQTOPO_BENCH_BACKLOG) and
// the retry delays (1s,2s, or $RMQTOPO_BENCH_RETURN_DELAYS) of the backlog
// benchmarks.
func backlogSettings() (n int, delays []string) {
	n = 10_000
	if v, err := strconv.Atoi(os.Getenv("RMQTOPO_BENCH_BACKLOG")); err == nil && v > 0 {
		n = v
	}
	delays = []string{"1s", "2s"}
	if v := os.Getenv("RMQTOPO_BENCH_RETURN_DELAYS"); v != "" {
		delays = strings.Split(v, ",")
	}
	return n, delays
}

// benchHandlers is 1 and 8, or the comma-separated numbers in
// $RMQTOPO_BENCH_HANDLERS.
func benchHandlers() []int {
	v := os.Getenv("RMQTOPO_BENCH_HANDLERS")
	if v == "" {
		return []int{1, 8}
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		if n, err := strconv.Atoi(f); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

// floorLateness is the lateness of retries with no backlog at all, in the
// same run: 100 messages, one every 50 ms, each failing once and retried
// after delay through a return queue to one handler. It is what the
// broker and the machine add to any retry at the time, the floor under
// the backlog figures.
func floorLateness(b *testing.B, layout, delay string) []time.Duration {
	t := topo{layout: layout, queueType: "quorum", delays: []string{delay}, returnQueue: true}
	e := newEnv(b, t, nil)
	d, _ := contract.ParseDelay(delay)
	opts := []retry.ConsumeOption{retry.WithLogger(discardLogger()), retry.WithPrefetch(1)}
	if layout == "levels" {
		opts = append(opts, levelsOption(b, t, e, []time.Duration{d}))
	}
	const n = 100
	var mu sync.Mutex
	failed := map[string]time.Time{}
	var late []time.Duration
	done := make(chan struct{})
	h := func(_ context.Context, m amqp.Delivery) error {
		at := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if a, _ := retry.Attempt(m); a == 2 {
			if late = append(late, at.Sub(failed[m.MessageId])-d); len(late) == n {
				close(done)
			}
			return nil
		}
		failed[m.MessageId] = time.Now()
		return fmt.Errorf("fails once")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_ = retry.Consume(ctx, retry.DialURL(e.b.AMQPURLFor(e.vhost), amqp.Config{}), workQueue, h, opts...)
	}()
	for i := range n {
		e.publish(b, amqp.Publishing{MessageId: fmt.Sprintf("f%03d", i)})
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("floor: %d of %d retries after 5 minutes", len(late), n)
	}
	cancel()
	e.drop(b)
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(late)
	return slices.Clone(late)
}

// drop deletes e's vhost now rather than at the end of the benchmark: a
// measured run's queues (a DLQ of 2,000 messages, quorum queues) would
// otherwise load the broker under every later run.
func (e *env) drop(b *testing.B) {
	res, err := e.b.Mgmt(b).DeleteVhost(e.vhost)
	if err != nil {
		b.Logf("deleting vhost %q: %v", e.vhost, err)
		return
	}
	res.Body.Close()
}

// levelsOption is the WithLevels option of t's ladder, retrying after ds.
func levelsOption(b *testing.B, t topo, e *env, ds []time.Duration) retry.Option {
	f, err := spec.Parse("bench.yaml", []byte(t.yaml(e.vhost)))
	if err != nil {
		b.Fatal(err)
	}
	l, _ := f.Spec.Ladder()
	return retry.WithLevels(l, retry.Delays(ds...))
}

// backlogRun is one measurement of BenchmarkBacklogReturn.
type backlogRun struct {
	layout      string
	handlers    int
	returnQueue bool
	// plain consumes with a loop of the service's own (New, Handle) that
	// reads only the work queue, not with retry.Consume.
	plain  bool
	n      int
	delays []string

	late  [][]time.Duration // per retry level, sorted
	drain time.Duration     // until every first attempt was handled
	done  time.Duration     // until every last retry was handled
}

func (r *backlogRun) name() string {
	design := "today"
	if r.returnQueue {
		design = "return-queue"
	}
	name := fmt.Sprintf("%s/handlers-%d/%s", r.layout, r.handlers, design)
	if r.plain {
		name += "/plain-consumer"
	}
	return name
}

func (r *backlogRun) delay(k int) time.Duration {
	d, _ := contract.ParseDelay(r.delays[k])
	return d
}

// run provisions a fresh vhost, queues the backlog, consumes it until
// every failing message is in the DLQ, and keeps the figures.
func (r *backlogRun) run(b *testing.B) {
	t := topo{layout: r.layout, queueType: "quorum", delays: r.delays, returnQueue: r.returnQueue}
	e := newEnv(b, t, nil)
	e.prefill(b, r.n, amqp.Persistent)
	opts := []retry.Option{retry.WithLogger(discardLogger())}
	if r.layout == "levels" {
		ds := make([]time.Duration, len(r.delays))
		for i := range ds {
			ds[i] = r.delay(i)
		}
		opts = append(opts, levelsOption(b, t, e, ds))
	}
	var mu sync.Mutex
	failed := map[string]time.Time{}
	arrived := map[string]time.Time{}
	firsts, lasts := 0, 0
	done := make(chan struct{})
	start := time.Now()
	h := func(_ context.Context, d amqp.Delivery) error {
		at := time.Now()
		a, _ := retry.Attempt(d)
		i, _ := strconv.Atoi(d.MessageId)
		time.Sleep(500 * time.Microsecond)
		mu.Lock()
		defer mu.Unlock()
		key := d.MessageId + "/" + strconv.Itoa(a)
		if _, dup := arrived[key]; !dup {
			arrived[key] = at
			if a == 1 {
				if firsts++; firsts == r.n {
					r.drain = time.Since(start)
				}
			}
			if a == len(r.delays)+1 {
				if lasts++; lasts == (r.n+4)/5 {
					r.done = time.Since(start)
					close(done)
				}
			}
		}
		if i%5 == 0 {
			failed[key] = time.Now()
			return fmt.Errorf("always fails")
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- r.consume(ctx, e, h, opts) }()
	select {
	case <-done:
	case <-time.After(15 * time.Minute):
		b.Fatalf("%s: %d of %d last retries after 15 minutes", r.name(), lasts, (r.n+4)/5)
	}
	cancel()
	if err := <-stopped; err != nil {
		b.Fatal(err)
	}
	e.drop(b)
	mu.Lock()
	defer mu.Unlock()
	r.late = make([][]time.Duration, len(r.delays))
	for key, at := range arrived {
		id, a := splitKey(key)
		if a < 2 {
			continue
		}
		prev, ok := failed[id+"/"+strconv.Itoa(a-1)]
		if !ok {
			b.Fatalf("%s: attempt %d of %s without a failed attempt %d", r.name(), a, id, a-1)
		}
		r.late[a-2] = append(r.late[a-2], at.Sub(prev)-r.delay(a-2))
	}
	r.dump(b, start, failed, arrived)
	for _, l := range r.late {
		slices.Sort(l)
	}
}

// consume runs the run's consumer of the work queue with h until ctx is
// cancelled: retry.Consume, or with plain a loop of the service's own.
func (r *backlogRun) consume(ctx context.Context, e *env, h retry.Handler, opts []retry.Option) error {
	if r.plain {
		return plainConsume(ctx, e, h, r.handlers, opts)
	}
	copts := []retry.ConsumeOption{retry.WithPrefetch(r.handlers)}
	for _, o := range opts {
		copts = append(copts, o)
	}
	return retry.Consume(ctx, retry.DialURL(e.b.AMQPURLFor(e.vhost), amqp.Config{}), workQueue, h, copts...)
}

// dump appends, when $RMQTOPO_BENCH_LATE_CSV names a file, one line per
// delivery of the run (run, attempt, ms from the start to its arrival,
// ms late or -1 for a first attempt), to see whether late retries come together (a broker pause) or
// spread over the run.
func (r *backlogRun) dump(b *testing.B, start time.Time, failed, arrived map[string]time.Time) {
	path := os.Getenv("RMQTOPO_BENCH_LATE_CSV")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	for key, at := range arrived {
		id, a := splitKey(key)
		late := int64(-1) // a first attempt
		if prev, ok := failed[id+"/"+strconv.Itoa(a-1)]; ok && a >= 2 {
			late = (at.Sub(prev) - r.delay(a-2)).Milliseconds()
		}
		fmt.Fprintf(f, "%s,%d,%d,%d\n", r.name(), a, at.Sub(start).Milliseconds(), late)
	}
}

func splitKey(key string) (id string, attempt int) {
	id, a, _ := strings.Cut(key, "/")
	attempt, _ = strconv.Atoi(a)
	return id, attempt
}

func (r *backlogRun) report(b *testing.B) {
	b.ReportMetric(0, "ns/op")
	for k, l := range r.late {
		b.ReportMetric(ms(percentile(l, 0.5)), fmt.Sprintf("late-%s-p50-ms", r.delays[k]))
		b.ReportMetric(ms(percentile(l, 0.99)), fmt.Sprintf("late-%s-p99-ms", r.delays[k]))
	}
	b.ReportMetric(r.drain.Seconds(), "drain-s")
	b.ReportMetric(r.done.Seconds(), "done-s")
}

// verdict logs, for the pair (today, return queue), whether the return
// queue meets the goal and keeps today's drain time.
func verdict(runs [2]backlogRun, floor time.Duration) {
	today, rq := runs[0], runs[1]
	var parts []string
	met := true
	for k := range rq.late {
		p99, goal := percentile(rq.late[k], 0.99), rq.delay(k)/5+100*time.Millisecond
		met = met && p99 <= goal
		parts = append(parts, fmt.Sprintf("retry after %s: p99 late %v (today %v), goal ≤ %v",
			rq.delays[k], p99.Round(time.Millisecond), percentile(today.late[k], 0.99).Round(time.Millisecond), goal))
	}
	word := map[bool]string{true: "MET", false: "NOT MET"}
	// Printed, not logged: make bench shows it without -v.
	fmt.Printf("verdict %s, %d handlers: %s: on time %s (no-backlog floor p99 %v); first attempts drained in %.1fs (today %.1fs, x%.2f), everything done in %.1fs (today %.1fs, x%.2f)\n",
		rq.layout, rq.handlers, strings.Join(parts, "; "), word[met], floor.Round(time.Millisecond), rq.drain.Seconds(), today.drain.Seconds(),
		rq.drain.Seconds()/today.drain.Seconds(), rq.done.Seconds(), today.done.Seconds(), rq.done.Seconds()/today.done.Seconds())
}
