package broker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rmqtopo/rmqtopo/apply"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/definitions"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

// benchSpec is 1,000 classic work queues with 5 per-attempt wait queues
// each: 2,001 exchanges, 7,000 queues, 7,000 bindings.
func benchSpec(tb testing.TB, vhost string, queues int) topology.Topology {
	var sb strings.Builder
	sb.WriteString("version: 1\nlayout: per-attempt\nexchanges:\n  - {name: biz, type: topic}\nqueues:\n")
	for i := 0; i < queues; i++ {
		fmt.Fprintf(&sb, "  - name: svc%04d.work\n    bindings: [{exchange: biz, routing_key: \"k.%d\"}]\n    retry: {exponential: {initial: 1s, factor: 2, attempts: 5}}\n", i, i)
	}
	f, err := spec.Parse("bench.yaml", []byte(fmt.Sprintf("vhost: %q\n%s", vhost, sb.String())))
	if err != nil {
		tb.Fatal(err)
	}
	return spec.Expand(f)
}

type rawAPI struct {
	b  *brokertest.Broker
	hc *http.Client
}

func (r rawAPI) do(tb testing.TB, method, path string, body []byte) []byte {
	data, err := r.try(method, path, body)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

func (r rawAPI) try(method, path string, body []byte) ([]byte, error) {
	req, _ := http.NewRequest(method, r.b.MgmtURL+path, bytes.NewReader(body))
	req.SetBasicAuth(r.b.User, r.b.Password)
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return nil, fmt.Errorf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, data)
	}
	return data, nil
}

func timed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// BenchmarkPlanApply measures, in one run against the harness broker, on a
// spec of ~16,000 objects: RabbitMQ's own bulk export (GET
// /api/definitions/{vhost}) and import (POST), rmqtopo's plan with no
// changes and apply from empty (AMQP writes, and management-API writes for
// comparison), and a reader doing one GET per object with 8 in flight as
// the Terraform provider does. It does each step once whatever b.N is;
// run it with -benchtime 1x. RMQTOPO_BENCH_QUEUES scales the spec;
// RMQTOPO_BENCH_CONCURRENCY lists apply concurrencies to compare
// (default 32).
func BenchmarkPlanApply(b *testing.B) {
	queues := 1000
	if v, err := strconv.Atoi(os.Getenv("RMQTOPO_BENCH_QUEUES")); err == nil && v > 0 {
		queues = v
	}
	concurrencies := envInts(b, "RMQTOPO_BENCH_CONCURRENCY", strconv.Itoa(apply.DefaultConcurrency))
	bk := brokertest.Get(b)
	raw := rawAPI{b: bk, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}}
	ctx := context.Background()
	report := func(v float64, unit string) {
		b.ReportMetric(v, unit)
		fmt.Fprintf(os.Stderr, "  %-16s %10.3f\n", unit, v)
	}

	// RabbitMQ's import of the same definitions, into a vhost of its own.
	postVhost := bk.NewVhost(b)
	desired := benchSpec(b, postVhost, queues)
	objects := len(desired.Exchanges) + len(desired.Queues) + len(desired.Bindings)
	fmt.Fprintf(os.Stderr, "BenchmarkPlanApply: %d exchanges, %d queues, %d bindings (%d objects)\n",
		len(desired.Exchanges), len(desired.Queues), len(desired.Bindings), objects)
	doc := definitions.FromTopology(desired)
	doc.Vhosts = nil
	body, _ := json.Marshal(doc)
	post := timed(func() { raw.do(b, http.MethodPost, "/api/definitions", body) })

	// rmqtopo apply from empty: read, plan, apply, at each concurrency,
	// each into a fresh vhost.
	var applyTotal, applyOnly time.Duration
	var applyVhost string
	for i, conc := range concurrencies {
		vhost := bk.NewVhost(b)
		l := connect(b, bk, vhost)
		d := benchSpec(b, vhost, queues)
		var p plan.Plan
		var st *topology.State
		var res apply.Result
		total := timed(func() {
			var err error
			p, st, err = plan.Make(ctx, l.c, d, plan.Choices{Specs: benchSpecs(vhost)})
			if err != nil {
				b.Fatal(err)
			}
			if err := l.s.Lock(ctx, vhost); err != nil {
				b.Fatal(err)
			}
			res, err = apply.Apply(ctx, l.s, p, apply.Options{Records: plan.OwnRecords(st, benchSpecs(vhost)), Concurrency: conc})
			if err != nil {
				b.Fatal(err)
			}
		})
		fmt.Fprintf(os.Stderr, "  apply concurrency %d: %s total, %s of changes (%d changes)\n", conc, total.Round(time.Millisecond),
			res.Elapsed.Round(time.Millisecond), res.Changes())
		if i == 0 {
			applyTotal, applyOnly, applyVhost = total, res.Elapsed, vhost
		}
	}
	l := connect(b, bk, applyVhost)
	d := benchSpec(b, applyVhost, queues)

	// Plan with no changes against RabbitMQ's own export of the same
	// vhost, interleaved to share the machine's mood; medians of 3.
	var gets, plans []time.Duration
	for i := 0; i < 3; i++ {
		gets = append(gets, timed(func() { raw.do(b, http.MethodGet, "/api/definitions/"+url.PathEscape(applyVhost), nil) }))
		plans = append(plans, timed(func() {
			p, _, err := plan.Make(ctx, l.c, d, plan.Choices{Specs: benchSpecs(applyVhost)})
			if err != nil {
				b.Fatal(err)
			}
			if p.HasChanges() {
				b.Fatal("the plan after apply has changes")
			}
		}))
	}
	get, pl := median(gets), median(plans)

	// The same apply through the management API.
	httpVhost := bk.NewVhost(b)
	lh := connect(b, bk, httpVhost)
	lh.s.UseHTTPWrites()
	dh := benchSpec(b, httpVhost, queues)
	var httpApply time.Duration
	{
		p, st, err := plan.Make(ctx, lh.c, dh, plan.Choices{Specs: benchSpecs(httpVhost)})
		if err != nil {
			b.Fatal(err)
		}
		res, err := apply.Apply(ctx, lh.s, p, apply.Options{Records: plan.OwnRecords(st, benchSpecs(httpVhost)), Concurrency: 16})
		if err != nil {
			b.Fatal(err)
		}
		httpApply = res.Elapsed
	}

	// One GET per object, 8 in flight.
	perObject := timed(func() { readPerObject(b, raw, d, 8) })

	report(float64(objects), "objects")
	report(get.Seconds(), "get-s")
	report(post.Seconds(), "post-s")
	report(pl.Seconds(), "plan-s")
	report(applyTotal.Seconds(), "apply-s")
	report(applyOnly.Seconds(), "apply-changes-s")
	report(httpApply.Seconds(), "apply-http-s")
	report(perObject.Seconds(), "per-object-get-s")
	report(pl.Seconds()/get.Seconds(), "plan/get")
	report(applyTotal.Seconds()/post.Seconds(), "apply/post")
	report(httpApply.Seconds()/post.Seconds(), "apply-http/post")
	report(perObject.Seconds()/pl.Seconds(), "per-object/plan")
}

// readPerObject reads every object of t with its own GET, inflight at a
// time, the way a per-resource provider refreshes its state.
func readPerObject(tb testing.TB, raw rawAPI, t topology.Topology, inflight int) {
	var paths []string
	for _, e := range t.Exchanges {
		paths = append(paths, "/api/exchanges/"+url.PathEscape(e.Vhost)+"/"+url.PathEscape(e.Name))
	}
	for _, q := range t.Queues {
		paths = append(paths, "/api/queues/"+url.PathEscape(q.Vhost)+"/"+url.PathEscape(q.Name))
	}
	for _, bd := range t.Bindings {
		dt := "q"
		if bd.DestinationType == topology.DestExchange {
			dt = "e"
		}
		paths = append(paths, "/api/bindings/"+url.PathEscape(bd.Vhost)+"/e/"+url.PathEscape(bd.Source)+"/"+dt+"/"+url.PathEscape(bd.Destination))
	}
	work := make(chan string)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i := 0; i < inflight; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				if _, err := raw.try(http.MethodGet, p, nil); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, p := range paths {
		work <- p
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		tb.Fatal(firstErr)
	}
}

// benchSpecs names the benchmark's spec in vhost.
func benchSpecs(vhost string) map[string]string { return map[string]string{vhost: "bench"} }

// BenchmarkDeleteCounts measures the exact counts of a plan that deletes
// 1,000 queues (RMQTOPO_BENCH_QUEUES to scale): one AMQP passive declare
// each, pipelined over a few channels, and the whole plan that needs them.
func BenchmarkDeleteCounts(b *testing.B) {
	queues := 1000
	if v, err := strconv.Atoi(os.Getenv("RMQTOPO_BENCH_QUEUES")); err == nil && v > 0 {
		queues = v
	}
	bk := brokertest.Get(b)
	vhost := bk.NewVhost(b)
	l := connect(b, bk, vhost)
	ctx := context.Background()
	var sb strings.Builder
	sb.WriteString("version: 1\nqueues:\n")
	for i := 0; i < queues; i++ {
		fmt.Fprintf(&sb, "  - {name: q%05d, dlq: false}\n", i)
	}
	f, err := spec.Parse("bench.yaml", []byte(fmt.Sprintf("vhost: %q\n%s", vhost, sb.String())))
	if err != nil {
		b.Fatal(err)
	}
	full := spec.Expand(f)
	p, st, err := plan.Make(ctx, l.c, full, plan.Choices{Specs: benchSpecs(vhost)})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := apply.Apply(ctx, l.s, p, apply.Options{Records: plan.OwnRecords(st, benchSpecs(vhost))}); err != nil {
		b.Fatal(err)
	}
	empty := topology.Topology{Vhosts: []string{vhost}}
	names := make([]string, len(full.Queues))
	for i, q := range full.Queues {
		names[i] = q.Name
	}
	var counts, plans []time.Duration
	for i := 0; i < 3; i++ {
		counts = append(counts, timed(func() {
			if err := l.c.Count(ctx, topology.NewState(nil), map[string][]string{vhost: names}); err != nil {
				b.Fatal(err)
			}
		}))
		plans = append(plans, timed(func() {
			p, _, err := plan.Make(ctx, l.c, empty, plan.Choices{Specs: benchSpecs(vhost), Prune: true})
			if err != nil {
				b.Fatal(err)
			}
			if n := plan.CountsNeeded(p)[vhost]; len(n) != queues {
				b.Fatalf("plan counts %d queues, want %d", len(n), queues)
			}
			for _, c := range p.Changes {
				if c.DestroysQueue() && c.Messages() == nil {
					b.Fatalf("no count for %s", c.Address)
				}
			}
		}))
	}
	b.ReportMetric(median(counts).Seconds(), "count-s")
	b.ReportMetric(median(plans).Seconds(), "plan-s")
	fmt.Fprintf(os.Stderr, "BenchmarkDeleteCounts: %d queues: counts %s, whole plan %s (medians of 3)\n",
		queues, median(counts).Round(time.Millisecond), median(plans).Round(time.Millisecond))
}
