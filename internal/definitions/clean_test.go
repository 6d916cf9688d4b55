package definitions_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/definitions"
	"github.com/rmqtopo/rmqtopo/topology"
)

func TestClean(t *testing.T) {
	in := topology.Topology{
		Vhosts: []string{"v"},
		Queues: []topology.Queue{
			{Vhost: "v", Name: "amq.gen-abc"}, {Vhost: "v", Name: contract.LockQueue}, {Vhost: "v", Name: "work"},
		},
		Bindings: []topology.Binding{
			{Vhost: "v", Source: "x", Destination: "amq.gen-abc", DestinationType: topology.DestQueue},
			{Vhost: "v", Source: "x", Destination: "work", DestinationType: topology.DestQueue},
			{Vhost: "v", Source: "x", Destination: "amq.gen-abc", DestinationType: topology.DestExchange},
		},
	}
	want := topology.Topology{
		Vhosts: []string{"v"},
		Queues: []topology.Queue{{Vhost: "v", Name: "work"}},
		Bindings: []topology.Binding{
			{Vhost: "v", Source: "x", Destination: "work", DestinationType: topology.DestQueue},
			{Vhost: "v", Source: "x", Destination: "amq.gen-abc", DestinationType: topology.DestExchange},
		},
	}
	if diff := cmp.Diff(want, definitions.Clean(in)); diff != "" {
		t.Errorf("Clean (-want +got):\n%s", diff)
	}
}
