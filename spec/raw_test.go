package spec

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/topology"
)

// TestExpandRawQueues pins what raw queues and queue arguments expand to:
// raw queues exactly as written, and a managed queue's extra arguments
// beside the ones rmqtopo generates.
func TestExpandRawQueues(t *testing.T) {
	const in = `version: 1
vhost: v
exchanges:
  - {name: in, type: topic}
queues:
  - name: scratch
    raw: true
    durable: false
    auto_delete: true
    arguments: {x-expires: 60000, x-max-priority: 5, custom: [1, "a"]}
    bindings:
      - {exchange: in, routing_key: k}
  - name: log
    raw: true
    type: stream
    arguments: {x-max-age: 7D}
  - name: votes
    raw: true
    type: quorum
  - name: work
    type: quorum
    dlq: false
    arguments: {x-single-active-consumer: true, x-overflow: drop-head}
`
	f, err := Parse("raw.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	got := Expand(f)
	want := topology.Topology{
		Vhosts:    []string{"v"},
		Exchanges: []topology.Exchange{{Vhost: "v", Name: "in", Type: "topic", Durable: true}, {Vhost: "v", Name: "work.retry", Type: "headers", Durable: true}},
		Queues: []topology.Queue{
			{Vhost: "v", Name: "log", Durable: true, Arguments: topology.Args{"x-queue-type": "stream", "x-max-age": "7D"}},
			{Vhost: "v", Name: "scratch", AutoDelete: true, Arguments: topology.Args{"x-expires": int64(60000), "x-max-priority": int64(5), "custom": []any{int64(1), "a"}}},
			{Vhost: "v", Name: "votes", Durable: true, Arguments: topology.Args{"x-queue-type": "quorum"}},
			// The default delivery limit rmqtopo sets is an argument; the
			// spec sets nothing that may change, so work has no policy.
			{Vhost: "v", Name: "work", Durable: true, Arguments: topology.Args{"x-queue-type": "quorum", "x-single-active-consumer": true, "x-overflow": "drop-head", "x-delivery-limit": int64(20)}},
		},
		Bindings: []topology.Binding{{Vhost: "v", Source: "in", Destination: "scratch", DestinationType: "queue", RoutingKey: "k"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Expand (-want +got):\n%s", diff)
	}
}
