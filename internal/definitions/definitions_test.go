package definitions

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rmqtopo/rmqtopo/topology"
)

// A single-vhost export as 3.x brokers answer GET /api/definitions/{vhost}:
// no vhost fields, numbers as JSON numbers, built-in exchanges included by
// some versions, and classic queues with or without an explicit type.
const export = `{
  "rabbit_version": "3.10.8",
  "exchanges": [
    {"name": "amq.topic", "type": "topic", "durable": true, "auto_delete": false, "internal": false, "arguments": {}},
    {"name": "q.retry", "type": "headers", "durable": true, "auto_delete": false, "internal": false, "arguments": {"alternate-exchange": "q.dlx"}}
  ],
  "queues": [
    {"name": "q", "durable": true, "auto_delete": false, "arguments": {"x-queue-type": "classic", "x-message-ttl": 60000}},
    {"name": "w", "durable": true, "auto_delete": false, "arguments": {"x-queue-type": "quorum", "x-delivery-limit": 20}}
  ],
  "bindings": [
    {"source": "amq.topic", "destination": "q", "destination_type": "queue", "routing_key": "k", "arguments": {}},
    {"source": "q.retry", "destination": "w", "destination_type": "queue", "routing_key": "", "arguments": {"x-match": "all", "rmqtopo-attempt": "1"}}
  ],
  "policies": [
    {"name": "p", "pattern": "^q$", "definition": {"max-length": 10}, "priority": 0}
  ]
}`

func TestDecodeNormalisesALiveExport(t *testing.T) {
	d, err := Decode([]byte(export), "v1")
	if err != nil {
		t.Fatal(err)
	}
	got := d.ToTopology("v1")
	want := topology.Topology{
		Vhosts:    []string{"v1"},
		Exchanges: []topology.Exchange{{Vhost: "v1", Name: "q.retry", Type: "headers", Durable: true, Arguments: topology.Args{"alternate-exchange": "q.dlx"}}},
		Queues: []topology.Queue{
			{Vhost: "v1", Name: "q", Durable: true, Arguments: topology.Args{"x-message-ttl": int64(60000)}},
			{Vhost: "v1", Name: "w", Durable: true, Arguments: topology.Args{"x-queue-type": "quorum", "x-delivery-limit": int64(20)}},
		},
		Bindings: []topology.Binding{{Vhost: "v1", Source: "q.retry", Destination: "w", DestinationType: "queue",
			Arguments: topology.Args{"x-match": "all", "rmqtopo-attempt": "1"}}},
		Policies: []topology.Policy{{Vhost: "v1", Name: "p", Pattern: "^q$", ApplyTo: "all", Definition: topology.Args{"max-length": int64(10)}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ToTopology (-want +got):\n%s", diff)
	}
}

func TestToTopologyKeepsOnlyTheAskedVhosts(t *testing.T) {
	d := Document{Vhosts: []Vhost{{Name: "a"}, {Name: "b"}}, Queues: []Queue{{Name: "q", Vhost: "a"}, {Name: "q", Vhost: "b"}}}
	got := d.ToTopology("b")
	if len(got.Queues) != 1 || got.Queues[0].Vhost != "b" || len(got.Vhosts) != 1 {
		t.Errorf("ToTopology(\"b\") = %+v, want only vhost b", got)
	}
}

func TestFromTopologyWritesEmptyTablesNotNull(t *testing.T) {
	d := FromTopology(topology.Topology{Queues: []topology.Queue{{Vhost: "/", Name: "q", Durable: true}}})
	if d.Queues[0].Arguments == nil {
		t.Error("arguments must be {} as in the definitions RabbitMQ itself exports, not null")
	}
}
