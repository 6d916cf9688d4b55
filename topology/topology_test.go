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

// TestCompareBindingsIsAddressOrder checks the comparison Sort uses
// against the addresses it avoids building, on names where the pieces of
// "source -> destination" straddle each other.
func TestCompareBindingsIsAddressOrder(t *testing.T) {
	names := []string{"", "a", "a ", "a -", "a ->", "a -> b", "ab", "a-", "b", "a -> a"}
	var bs []Binding
	for _, v := range []string{"/", "v"} {
		for _, s := range names {
			for _, d := range names {
				for _, k := range []string{"", "k"} {
					bs = append(bs, Binding{Vhost: v, Source: s, Destination: d, DestinationType: DestQueue, RoutingKey: k})
				}
			}
		}
	}
	bs = append(bs, Binding{Vhost: "/", Source: "a", Destination: "b", DestinationType: DestExchange},
		Binding{Vhost: "/", Source: "a", Destination: "b", DestinationType: DestQueue, Arguments: Args{"x": int64(1)}})
	for _, x := range bs {
		for _, y := range bs {
			if got, want := CompareBindings(x, y), x.Addr().Compare(y.Addr()); got != want {
				t.Fatalf("CompareBindings(%v, %v) = %d, address order says %d", x.Addr(), y.Addr(), got, want)
			}
			if got, want := x.Addr().Compare(y.Addr()) < 0, x.Addr().Less(y.Addr()); got != want {
				t.Fatalf("Compare and Less disagree on %v, %v", x.Addr(), y.Addr())
			}
		}
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
