package spec

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/topology"
)

// TestNativeDelayedRetry: a linear quorum queue becomes one queue with
// RabbitMQ 4.3's delayed-retry arguments and its DLQ; a queue on another
// schedule keeps its retry exchange and the wait queues it uses, even one
// it shares with the converted queue.
func TestNativeDelayedRetry(t *testing.T) {
	f, err := Parse("n.yaml", []byte(`version: 1
vhost: v
queues:
  - {name: a, type: quorum, retry: {linear: {step: 5s, attempts: 3}}}
  - {name: b, type: quorum, retry: {delays: [5s]}}
  - {name: c, retry: {linear: {step: 1s, attempts: 2}}}
`))
	if err != nil {
		t.Fatal(err)
	}
	got, converted := NativeDelayedRetry([]*File{f}, Expand(f))
	if diff := cmp.Diff([]string{"a"}, converted); diff != "" {
		t.Errorf("converted (-want +got):\n%s", diff)
	}
	a, _ := got.Queue("v", "a")
	// Dead-lettering into a.dlx, at least once, is an argument of a's.
	want := quorumArgs(3, merge(atLeastOnce, topology.Args{"x-delayed-retry-type": "failed",
		"x-delayed-retry-min": int64(5000), "x-delayed-retry-max": int64(15000), "x-dead-letter-exchange": "a.dlx"}))
	if diff := cmp.Diff(want, a.Arguments); diff != "" {
		t.Errorf("a's arguments (-want +got):\n%s", diff)
	}
	names := map[string]bool{}
	for _, q := range got.Queues {
		names[q.Name] = true
	}
	for _, e := range got.Exchanges {
		names[e.Name] = true
	}
	for _, p := range got.Policies {
		names[p.Name] = true
	}
	for n, want := range map[string]bool{"a.retry": false, "a.dlx": true, "a.dlq": true, "rmqtopo.wait.5s": true,
		"rmqtopo.wait.10s": false, "rmqtopo.wait.15s": false, "b.retry": true, "c.retry": true, "rmqtopo.wait.1s": true,
		"rmqtopo.exchange.a.retry": false, "rmqtopo.exchange.b.retry": false, "rmqtopo.queue.a": false} {
		if names[n] != want {
			t.Errorf("%s present = %v, want %v", n, names[n], want)
		}
	}
}
