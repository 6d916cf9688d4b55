// Package retrymetrics implements retry.Observer as Prometheus metrics, with
// client_golang, the standard exposition library. It lives apart from
// package retry so that a service using the helper without metrics does not
// link Prometheus.
//
//	m := retrymetrics.New()
//	prometheus.MustRegister(m) // or a registry of your own
//	err := retry.Consume(ctx, dial, "orders", handle, retry.WithObserver(m))
//
// Metrics, each labelled with the work queue:
//
//	rmqtopo_retry_deliveries_total{queue,outcome}      counter: ack, retry, dead-letter, requeue
//	rmqtopo_retry_dead_letters_total{queue,reason}     counter: rejected, exhausted, malformed-attempt
//	rmqtopo_retry_settle_errors_total{queue,outcome}   counter: settlements that failed (see retry.Settle)
//	rmqtopo_retry_delivery_attempt{queue}              histogram of attempt numbers (1 = first delivery)
//	rmqtopo_retry_handler_duration_seconds{queue}      histogram of handler run time
//	rmqtopo_retry_confirms_pending{queue}              gauge: copies waiting for the broker's confirmation
//	rmqtopo_retry_reconnects_total{queue}              counter: connections retry.Consume made after losing one
package retrymetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rmqtopo/rmqtopo/retry"
)

// Metrics is a retry.Observer and a prometheus.Collector.
type Metrics struct {
	deliveries  *prometheus.CounterVec
	deadLetters *prometheus.CounterVec
	settleErrs  *prometheus.CounterVec
	attempts    *prometheus.HistogramVec
	handler     *prometheus.HistogramVec
	pending     *prometheus.GaugeVec
	reconnects  *prometheus.CounterVec
}

var _ retry.Observer = (*Metrics)(nil)

// New returns the metrics, not yet registered.
func New() *Metrics {
	const ns, sub = "rmqtopo", "retry"
	return &Metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "deliveries_total", Help: "Deliveries settled, by outcome (ack, retry, dead-letter, requeue)."},
			[]string{"queue", "outcome"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "dead_letters_total", Help: "Messages the helper sent to the DLQ, by reason (rejected, exhausted, malformed-attempt)."},
			[]string{"queue", "reason"}),
		settleErrs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "settle_errors_total", Help: "Settlements that failed (copy not confirmed, or ack failed), by outcome."},
			[]string{"queue", "outcome"}),
		attempts: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub,
			Name: "delivery_attempt", Help: "Attempt number of each settled delivery (1 = first delivery; 0 = malformed header).",
			Buckets: []float64{1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 50, 100}},
			[]string{"queue"}),
		handler: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub,
			Name: "handler_duration_seconds", Help: "Time the handler ran per delivery.",
			Buckets: prometheus.DefBuckets},
			[]string{"queue"}),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "confirms_pending", Help: "Retry and dead-letter copies published and waiting for the broker's confirmation."},
			[]string{"queue"}),
		reconnects: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "reconnects_total", Help: "Connections retry.Consume made after losing one (its first is not counted)."},
			[]string{"queue"}),
	}
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.deliveries, m.deadLetters, m.settleErrs, m.attempts, m.handler, m.pending, m.reconnects}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

// Retried implements retry.Observer; deliveries are counted in Settled.
func (m *Metrics) Retried(string, int) {}

// DeadLettered implements retry.Observer.
func (m *Metrics) DeadLettered(queue, reason string) {
	m.deadLetters.WithLabelValues(queue, reason).Inc()
}

// Settled implements retry.Observer.
func (m *Metrics) Settled(s retry.Settlement) {
	m.deliveries.WithLabelValues(s.Queue, s.Outcome.String()).Inc()
	if s.Err != nil {
		m.settleErrs.WithLabelValues(s.Queue, s.Outcome.String()).Inc()
	}
	m.attempts.WithLabelValues(s.Queue).Observe(float64(s.Attempt))
	if s.Handled > 0 {
		m.handler.WithLabelValues(s.Queue).Observe(s.Handled.Seconds())
	}
}

// ConfirmsPending implements retry.Observer.
func (m *Metrics) ConfirmsPending(queue string, delta int) {
	m.pending.WithLabelValues(queue).Add(float64(delta))
}

// Connected implements retry.Observer: it counts reconnections.
// The first connection makes the counter exist at 0.
func (m *Metrics) Connected(queue string, reconnect bool) {
	c := m.reconnects.WithLabelValues(queue)
	if reconnect {
		c.Inc()
	}
}
