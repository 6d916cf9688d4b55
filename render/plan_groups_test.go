package render

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

func TestNaturalLess(t *testing.T) {
	names := []string{"svc10", "svc2", "svc1.dlq", "svc1", "a", "svc02", "svc100", "b2c10", "b2c9", ""}
	slices.SortFunc(names, func(a, b string) int {
		if naturalLess(a, b) {
			return -1
		}
		if naturalLess(b, a) {
			return 1
		}
		return 0
	})
	want := []string{"", "a", "b2c9", "b2c10", "svc1", "svc1.dlq", "svc2", "svc02", "svc10", "svc100"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("natural order (-want +got):\n%s", diff)
	}
}

// TestGroupChanges: objects go with the spec queue they were generated
// for, by the contract's names and the presets'; shared objects last.
func TestGroupChanges(t *testing.T) {
	q := func(name string) plan.Change {
		return plan.Change{Action: plan.Create, Address: topology.Address{Kind: topology.KindQueue, Vhost: "/", Name: name}}
	}
	x := func(name string) plan.Change {
		return plan.Change{Action: plan.Create, Address: topology.Address{Kind: topology.KindExchange, Vhost: "/", Name: name}}
	}
	b := func(src, dst string) plan.Change {
		return plan.Change{Action: plan.Create, Address: topology.Address{Kind: topology.KindBinding, Vhost: "/", Name: src + " -> " + dst},
			After: &plan.Object{Binding: &topology.Binding{Source: src, Destination: dst}}}
	}
	noop := q("kept")
	noop.Action = plan.NoOp
	changes := []plan.Change{
		q("svc10"), q("svc10.dlq"), x("svc10.retry"), x("svc10.dlx"), q("svc10.wait.1.5s"), b("svc10.retry", "svc10.wait.1.5s"),
		q("svc2"), q("svc2.parking-lot"), b("svc2.retry", "rmqtopo.wait.5s"), q("rmqtopo.wait.5s"), b("events", "svc2"),
		q("ev"), x("ev__retry_dlx"), x("ev__retry_exchange"), q("ev__retry.1"), q("ev.dlq"), q("ev.exhausted"),
		q("demo"), q("demo.delay_5s"),
		q("kept.dlq"), noop, // kept is a queue of the plan, unchanged
		q("lonely.dlq"), // no queue "lonely": a spec queue of its own
		x("events"), {Action: plan.Create, Address: topology.Address{Kind: topology.KindPolicy, Vhost: "/", Name: "limits"}},
	}
	got := map[string][]string{}
	var order []string
	for _, g := range groupChanges(changes) {
		order = append(order, g.Queue)
		for _, c := range g.Changes {
			got[g.Queue] = append(got[g.Queue], c.Address.Name)
		}
	}
	want := map[string][]string{
		"demo":       {"demo", "demo.delay_5s"},
		"ev":         {"ev__retry_dlx", "ev__retry_exchange", "ev", "ev.dlq", "ev.exhausted", "ev__retry.1"},
		"kept":       {"kept.dlq"},
		"lonely.dlq": {"lonely.dlq"},
		"svc2":       {"svc2", "svc2.parking-lot", "events -> svc2", "svc2.retry -> rmqtopo.wait.5s"},
		"svc10":      {"svc10.dlx", "svc10.retry", "svc10", "svc10.dlq", "svc10.wait.1.5s", "svc10.retry -> svc10.wait.1.5s"},
		"":           {"events", "rmqtopo.wait.5s", "limits"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("groups (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"demo", "ev", "kept", "lonely.dlq", "svc2", "svc10", ""}, order); diff != "" {
		t.Errorf("group order (-want +got):\n%s", diff)
	}
}
