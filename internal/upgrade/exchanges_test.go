package upgrade

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeExchanges is a 3.10 vhost with an exchange of each kind of type, a
// binding and a pointer to the delayed one, and a node that has more
// types enabled than the vhost uses.
func fakeExchanges() Snapshot {
	return Snapshot{Version: v("3.10.8"), Vhost: "/",
		Queues: []Queue{
			{Name: "work", Type: "quorum", Durable: true, Arguments: map[string]any{"x-delivery-limit": float64(5), "x-dead-letter-exchange": "later"}},
		},
		Policies: []Policy{{Name: "ae", Pattern: "^in$", ApplyTo: "exchanges", Definition: map[string]any{"alternate-exchange": "later"}}},
		Exchanges: []Exchange{
			{Name: "", Type: "direct"},
			{Name: "in", Type: "topic"},
			{Name: "later", Type: "x-delayed-message", Arguments: map[string]any{"x-delayed-type": "direct"}},
			{Name: "hash", Type: "x-consistent-hash", Arguments: map[string]any{"alternate-exchange": "later"}},
			{Name: "fed", Type: "x-federation-upstream"},
			{Name: "custom", Type: "x-acme"},
		},
		Bindings: []Binding{
			{Source: "in", Destination: "later", DestinationType: "exchange", RoutingKey: "a"},
			{Source: "later", Destination: "work", DestinationType: "queue", RoutingKey: "work"},
			{Source: "in", Destination: "hash", DestinationType: "exchange", RoutingKey: "b"},
		},
		ExchangeTypes: []string{"direct", "fanout", "headers", "topic", "x-consistent-hash", "x-delayed-message", "x-random", "x-federation-upstream"},
	}
}

func exchangeCodes(r Report) []string {
	var out []string
	for _, c := range codesOf(r) {
		if c >= "UP115" {
			out = append(out, c)
		}
	}
	return out
}

// wantExchanges are fakeExchanges' verdicts on a 4.x target as installed.
var wantExchanges = []string{
	"UP115 exchange custom type",
	"UP115 exchange later type",
	"UP116 exchange hash type",
	"UP117 binding in -> exchange later routing_key",
	"UP117 binding later -> queue work routing_key",
	"UP118 exchange hash alternate-exchange",
	"UP118 policy ae alternate-exchange",
	"UP118 queue work x-dead-letter-exchange",
	"UP119 exchange-type x-random ",
}

func TestJudgeExchanges(t *testing.T) {
	want := wantExchanges
	for _, target := range []string{"4.0.5", "4.3.6"} {
		r := Judge(fakeExchanges(), v(target))
		if diff := cmp.Diff(want, exchangeCodes(r)); diff != "" {
			t.Errorf("3.10 → %s (-want +got):\n%s", target, diff)
		}
	}
	for _, vd := range Judge(fakeExchanges(), v("4.0.5")).Verdicts {
		if vd.Code == CodeExchangeTypeMissing && vd.Name == "later" && !strings.Contains(vd.Advice, "own build for RabbitMQ 4.0") {
			t.Errorf("UP115 on 4.0 names no build of the plugin for 4.0: %+v", vd)
		}
	}
	r := Judge(fakeExchanges(), v("4.3.6"))
	for _, vd := range r.Verdicts {
		switch {
		case vd.Code == CodeExchangeTypeMissing && vd.Name == "later" &&
			(!strings.Contains(vd.Advice, "native") || !strings.Contains(vd.Advice, "levels") || !strings.Contains(vd.Detail, "routes as direct")):
			t.Errorf("UP115 for the delayed exchange names no rmqtopo alternative or x-delayed-type: %+v", vd)
		case vd.Code == CodeExchangeTypeMissing && vd.Name == "later" && strings.Contains(vd.Advice, "own build"):
			t.Errorf("UP115 on 4.3 offers a build of the delayed plugin, which has none for 4.3: %+v", vd)
		case vd.Code == CodeExchangeTypePlugin && !strings.Contains(vd.Advice, "rabbitmq-plugins enable rabbitmq_consistent_hash_exchange"):
			t.Errorf("UP116 without the command to enable: %+v", vd)
		}
	}
}

// A live target that has a plugin enabled needs nothing for its type,
// and a third-party type it has (a plugin installed apart) is fine.
func TestJudgeExchangesLiveTarget(t *testing.T) {
	g := Green{Version: v("4.3.6"), ExchangeTypes: []string{"direct", "fanout", "headers", "topic", "x-local-random", "x-consistent-hash", "x-acme", "x-random"}}
	got := exchangeCodes(JudgeGreen(fakeExchanges(), g))
	// It has the plugins: no UP116 nor UP119, and x-acme is no UP115.
	want := slices.DeleteFunc(slices.Clone(wantExchanges), func(c string) bool {
		return strings.HasPrefix(c, "UP116") || strings.HasPrefix(c, "UP119") || c == "UP115 exchange custom type"
	})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// x-modulus-hash is rabbitmq_sharding's up to 4.0 and built in by 4.3.
func TestModulusHashMovedIn(t *testing.T) {
	s := Snapshot{Version: v("3.10.8"), Vhost: "/", Exchanges: []Exchange{{Name: "shards", Type: "x-modulus-hash"}}}
	if got := exchangeCodes(Judge(s, v("4.0.5"))); len(got) != 1 || got[0] != "UP116 exchange shards type" {
		t.Errorf("3.10 → 4.0: %v", got)
	}
	if got := exchangeCodes(Judge(s, v("4.3.6"))); len(got) != 0 {
		t.Errorf("3.10 → 4.3: %v", got)
	}
}

// x-local-random is built in from 4.0: a 4.0 source's exchange of it is
// clean on 4.3; the table does not give it to 3.x.
func TestLocalRandomBuiltIn(t *testing.T) {
	s := Snapshot{Version: v("4.0.5"), Vhost: "/", Exchanges: []Exchange{{Name: "rpc", Type: "x-local-random"}},
		ExchangeTypes: []string{"direct", "x-local-random"}}
	if got := exchangeCodes(Judge(s, v("4.3.6"))); len(got) != 0 {
		t.Errorf("4.0 → 4.3: %v", got)
	}
	if b, _ := typeAt(lookupType("x-local-random", v("3.13.7")), v("3.13.7")); b {
		t.Error("x-local-random built into 3.13")
	}
}
