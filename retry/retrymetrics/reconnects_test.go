package retrymetrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rmqtopo/rmqtopo/retry/retrymetrics"
)

// TestReconnectsCounted: a first connection makes the counter exist at 0,
// and only reconnections count.
func TestReconnectsCounted(t *testing.T) {
	m := retrymetrics.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	m.Connected("orders", false)
	m.Connected("orders", true)
	m.Connected("orders", true)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "rmqtopo_retry_reconnects_total" {
			continue
		}
		if got := f.GetMetric()[0].GetCounter().GetValue(); got != 2 {
			t.Errorf("reconnects = %v; want 2", got)
		}
		return
	}
	t.Error("no rmqtopo_retry_reconnects_total")
}
