package topology_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/rmqtopo/rmqtopo/topology"
)

// TestKindNames checks that kinds sort as their names do (addresses were
// ordered by the names before kinds were bytes), read back from JSON, and
// that an unknown name is refused.
func TestKindNames(t *testing.T) {
	kinds := []topology.Kind{topology.KindVhost, topology.KindQueue, topology.KindPolicy, topology.KindExchange, topology.KindBinding}
	byName := slices.SortedFunc(slices.Values(kinds), func(a, b topology.Kind) int { return strings.Compare(a.String(), b.String()) })
	byValue := slices.Sorted(slices.Values(kinds))
	if !slices.Equal(byName, byValue) {
		t.Errorf("kinds by name %v, by value %v", byName, byValue)
	}
	for _, k := range kinds {
		b, err := json.Marshal(topology.Address{Kind: k, Vhost: "/", Name: "n"})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"kind":"`+k.String()+`"`) {
			t.Errorf("%v as JSON: %s", k, b)
		}
		var a topology.Address
		if err := json.Unmarshal(b, &a); err != nil || a.Kind != k {
			t.Errorf("%s read back as %v, %v", b, a.Kind, err)
		}
	}
	var a topology.Address
	if err := json.Unmarshal([]byte(`{"kind":"stream","vhost":"/","name":"n"}`), &a); err == nil {
		t.Errorf("an unknown kind read as %v", a.Kind)
	}
}
