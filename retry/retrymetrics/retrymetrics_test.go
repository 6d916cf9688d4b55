package retrymetrics_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/retry"
	"github.com/rmqtopo/rmqtopo/retry/retrymetrics"
	"github.com/rmqtopo/rmqtopo/spec"
)

func TestMain(m *testing.M) { brokertest.Main(m) }

// tally counts settlements the way the test expects the metrics to.
type tally struct {
	retry.NopObserver
	mu       sync.Mutex
	outcomes map[string]float64
	attempts map[int]int
	n        int
}

func (t *tally) Settled(s retry.Settlement) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.outcomes[s.Outcome.String()]++
	t.attempts[s.Attempt]++
	t.n++
}

func (t *tally) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

// TestScrape runs messages through Consume with the metrics as observer,
// scrapes /metrics over HTTP, and checks the counts against what happened:
// 30 messages acked at once, 20 acked on their second attempt, 10 rejected
// and 10 failing until their schedule (two attempts) is exhausted.
func TestScrape(t *testing.T) {
	const queue = "work"
	b := brokertest.Get(t)
	vhost := b.NewVhost(t)
	f, err := spec.Parse("t.yaml", fmt.Appendf(nil, "version: 1\nvhost: %q\nqueues:\n  - name: %s\n    retry: {delays: [50ms]}\n", vhost, queue))
	if err != nil {
		t.Fatal(err)
	}
	conn := b.Dial(t, vhost)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	brokertest.Declare(t, ch, spec.Expand(f))

	m := retrymetrics.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	seen := &tally{outcomes: map[string]float64{}, attempts: map[int]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	dial := retry.DialURL(b.AMQPURLFor(vhost), amqp.Config{})
	go func() {
		done <- retry.Consume(ctx, dial, queue, handle, retry.WithObserver(m), retry.WithObserver(seen),
			retry.WithLogger(slog.New(slog.DiscardHandler)), retry.WithPrefetch(4))
	}()
	var msgs []string
	for kind, n := range map[string]int{"ok": 30, "once": 20, "reject": 10, "always": 10} {
		for i := range n {
			msgs = append(msgs, fmt.Sprintf("%s-%d", kind, i))
		}
	}
	for _, id := range msgs {
		brokertest.PublishConfirmed(t, conn, "", queue, amqp.Publishing{MessageId: id, Body: []byte("x")})
	}
	// 70 first deliveries, 20+10 second ones, after a 0.05 s retry: a
	// guard around the 0.05 s measured.
	for deadline := waitguard.Deadline(time.Second); seen.count() < 100; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 100 deliveries settled (%v); work %d, wait %d, dlq %d", seen.count(), seen.outcomes, b.QueueDepth(t, vhost, queue), b.QueueDepth(t, vhost, "rmqtopo.wait.50ms"), b.QueueDepth(t, vhost, "work.dlq"))
		}
	}
	cancel()
	// A guard: Consume returns in milliseconds once cancelled (5 ms
	// measured).
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Consume: %v", err)
		}
	case <-time.After(waitguard.For(100 * time.Millisecond)):
		t.Fatal("Consume still running after its context was cancelled")
	}

	checkScrape(t, scrape(t, reg), seen)
}

// checkScrape compares the scraped metrics with the run TestScrape made.
func checkScrape(t *testing.T, fams map[string]*dto.MetricFamily, seen *tally) {
	t.Helper()
	got := map[string]float64{}
	for _, mt := range fams["rmqtopo_retry_deliveries_total"].GetMetric() {
		got[label(mt, "outcome")] = mt.GetCounter().GetValue()
	}
	want := map[string]float64{"ack": 50, "retry": 30, "dead-letter": 20}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("deliveries by outcome (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(seen.outcomes, got); diff != "" {
		t.Errorf("deliveries by outcome against the observer's own count (-observer +metrics):\n%s", diff)
	}
	dead := map[string]float64{}
	for _, mt := range fams["rmqtopo_retry_dead_letters_total"].GetMetric() {
		dead[label(mt, "reason")] = mt.GetCounter().GetValue()
	}
	if diff := cmp.Diff(map[string]float64{contract.ReasonRejected: 10, contract.ReasonExhausted: 10}, dead); diff != "" {
		t.Errorf("dead letters by reason (-want +got):\n%s", diff)
	}
	h := fams["rmqtopo_retry_delivery_attempt"].GetMetric()[0].GetHistogram()
	buckets := map[float64]uint64{}
	for _, bk := range h.GetBucket() {
		buckets[bk.GetUpperBound()] = bk.GetCumulativeCount()
	}
	if h.GetSampleCount() != 100 || h.GetSampleSum() != 130 || buckets[1] != 70 || buckets[2] != 100 {
		t.Errorf("attempt histogram: count %d sum %v, ≤1: %d, ≤2: %d; want 100, 130, 70, 100",
			h.GetSampleCount(), h.GetSampleSum(), buckets[1], buckets[2])
	}
	if n := fams["rmqtopo_retry_handler_duration_seconds"].GetMetric()[0].GetHistogram().GetSampleCount(); n != 100 {
		t.Errorf("handler durations observed %d times; want 100", n)
	}
	if v := fams["rmqtopo_retry_confirms_pending"].GetMetric()[0].GetGauge().GetValue(); v != 0 {
		t.Errorf("confirms pending after the run: %v; want 0", v)
	}
}

func handle(_ context.Context, d amqp.Delivery) error {
	attempt, _ := retry.Attempt(d)
	kind, _, _ := strings.Cut(d.MessageId, "-")
	switch {
	case kind == "reject":
		return retry.Permanent(errors.New("rejected"))
	case kind == "always", kind == "once" && attempt == 1:
		return errors.New("failed")
	}
	return nil
}

// scrape fetches /metrics from reg over HTTP and parses the text format.
func scrape(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("parsing the scrape: %v", err)
	}
	return fams
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
