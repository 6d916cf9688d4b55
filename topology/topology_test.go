package topology

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNormalizeArgsMakesBrokerAndSpecValuesEqual(t *testing.T) {
	var fromJSON map[string]any
	if err := json.Unmarshal([]byte(`{"x-message-ttl": 2000, "x-max-length": 1.5, "nested": {"n": 3}, "list": [1, "a"]}`), &fromJSON); err != nil {
		t.Fatal(err)
	}
	fromSpec := map[string]any{"x-message-ttl": int32(2000), "x-max-length": 1.5, "nested": map[string]any{"n": 3}, "list": []any{uint8(1), "a"}}
	if diff := cmp.Diff(NormalizeArgs(fromSpec), NormalizeArgs(fromJSON)); diff != "" {
		t.Errorf("normalised args differ (-spec +json):\n%s", diff)
	}
	if NormalizeArgs(map[string]any{}) != nil {
		t.Error("an empty table must normalise to nil so absent and empty compare equal")
	}
}

func TestSortIsCanonical(t *testing.T) {
	a := Topology{
		Vhosts:    []string{"b", "a"},
		Queues:    []Queue{{Vhost: "a", Name: "z"}, {Vhost: "a", Name: "m"}},
		Exchanges: []Exchange{{Vhost: "b", Name: "x"}, {Vhost: "a", Name: "x"}},
		Bindings: []Binding{
			{Vhost: "a", Source: "x", Destination: "z", DestinationType: DestQueue, RoutingKey: "2"},
			{Vhost: "a", Source: "x", Destination: "z", DestinationType: DestQueue, RoutingKey: "1"},
		},
	}
	b := Topology{
		Vhosts:    []string{"a", "b"},
		Queues:    []Queue{{Vhost: "a", Name: "m"}, {Vhost: "a", Name: "z"}},
		Exchanges: []Exchange{{Vhost: "a", Name: "x"}, {Vhost: "b", Name: "x"}},
		Bindings: []Binding{
			{Vhost: "a", Source: "x", Destination: "z", DestinationType: DestQueue, RoutingKey: "1"},
			{Vhost: "a", Source: "x", Destination: "z", DestinationType: DestQueue, RoutingKey: "2"},
		},
	}
	a.Sort()
	b.Sort()
	if diff := cmp.Diff(b, a); diff != "" {
		t.Errorf("Sort is order-dependent (-want +got):\n%s", diff)
	}
}

func TestBindingAddressIncludesArguments(t *testing.T) {
	one := Binding{Vhost: "/", Source: "q.retry", Destination: "w", DestinationType: DestQueue, Arguments: Args{"rmqtopo-attempt": "1"}}
	two := one
	two.Arguments = Args{"rmqtopo-attempt": "2"}
	if one.Addr() == two.Addr() {
		t.Errorf("bindings differing only in arguments share the address %v", one.Addr())
	}
}

func TestQueueTypeDefaultsToClassic(t *testing.T) {
	if got := (Queue{}).QueueType(); got != "classic" {
		t.Errorf("QueueType() = %q, want classic", got)
	}
	if got := (Queue{Arguments: Args{"x-queue-type": "quorum"}}).QueueType(); got != "quorum" {
		t.Errorf("QueueType() = %q, want quorum", got)
	}
}
