package plan_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/shapetest"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

const legacySpec = `
version: 1
vhost: v
queues:
  - {name: a, type: quorum, retry: {delays: [1s]}}
  - {name: b, retry: {delays: [1s]}, message_ttl: 1m}
  - {name: c, type: quorum, delivery_limit: 5, retry: {delays: [1s]}}
`

// A broker applied by an earlier rmqtopo, whose work queues carry their
// dead-lettering in their own policies, is planned with no change: the
// queues are kept (their arguments are immutable) and so are their
// policies, which still carry what the new shape declares as arguments.
func TestDiffKeepsLegacyQueues(t *testing.T) {
	desired := expand(t, legacySpec)
	live := shapetest.Legacy(desired)
	if len(live.Policies) != 3 {
		t.Fatalf("legacy shape has %d policies, want one per work queue: %v", len(live.Policies), live.Policies)
	}
	p := plan.DiffTopology(live, desired, plan.Options{})
	for _, c := range p.Changes {
		if c.Action != plan.NoOp {
			t.Errorf("%s %s, want no change: %s", c.Action, c.Address, c.Reason())
		}
	}
	// The plan says so, once for the vhost: a no-op is not shown.
	var legacy []plan.Diagnostic
	for _, d := range plan.Check(p, plan.CheckOptions{}) {
		if d.Code == plan.CodeLegacyShape {
			legacy = append(legacy, d)
		}
	}
	if len(legacy) != 1 || !strings.Contains(legacy[0].Message, `queues "a", "b", "c" in vhost "v"`) {
		t.Errorf("RT025 diagnostics: %v, want one naming a, b and c", legacy)
	}
	// A changed attribute updates the kept policy in place, with the
	// dead-lettering it carries.
	changed := expand(t, `
version: 1
vhost: v
queues:
  - {name: a, type: quorum, retry: {delays: [1s]}, message_ttl: 30s}
  - {name: b, retry: {delays: [1s]}, message_ttl: 1m}
  - {name: c, type: quorum, delivery_limit: 5, retry: {delays: [1s]}}
`)
	p = plan.DiffTopology(live, changed, plan.Options{})
	var updated *plan.Change
	for i, c := range p.Changes {
		switch {
		case c.Action == plan.NoOp:
		case c.Action == plan.Update && c.Address.Name == contract.QueuePolicy("a"):
			updated = &p.Changes[i]
		default:
			t.Errorf("%s %s, want only rmqtopo.queue.a updated: %s", c.Action, c.Address, c.Reason())
		}
	}
	if updated == nil {
		t.Fatal("rmqtopo.queue.a is not updated")
	}
	def := updated.After.Policy.Definition
	if def["message-ttl"] != int64(30000) || def["dead-letter-exchange"] != "a.dlx" || def["delivery-limit"] != int64(20) {
		t.Errorf("rmqtopo.queue.a after = %v, want the TTL with a's dead-lettering and delivery limit", def)
	}
}

// A new queue gets the new shape: no policy unless its spec sets an
// attribute that may change.
func TestDiffNewQueuesNeedNoPolicy(t *testing.T) {
	p := plan.DiffTopology(topology.Topology{}, expand(t, legacySpec), plan.Options{})
	var policies []string
	for _, c := range p.Changes {
		if c.Address.Kind == topology.KindPolicy {
			policies = append(policies, c.Address.Name)
		}
	}
	want := []string{contract.QueuePolicy("b"), contract.QueuePolicy("c")}
	if len(policies) != len(want) || policies[0] != want[0] || policies[1] != want[1] {
		t.Errorf("policies created = %v, want %v", policies, want)
	}
}

// migrate: true on a queue an earlier rmqtopo made moves it to the new
// shape: its replace is planned as a migration, which keeps its messages.
func TestDiffReshapesLegacyQueueOnMigrate(t *testing.T) {
	desired := expand(t, legacySpec)
	live := shapetest.Legacy(desired)
	a := topology.Address{Kind: topology.KindQueue, Vhost: "v", Name: "a"}
	p := plan.DiffTopology(live, desired, plan.Options{Migrate: plan.Migration{Queues: map[topology.Address]bool{a: true}}})
	var got []string
	for _, c := range p.Changes {
		if c.Action != plan.NoOp {
			got = append(got, c.Action.String()+" "+c.Address.String())
		}
	}
	if !slices.Contains(got, "migrate "+a.String()) {
		t.Errorf("changes %v, want a migration of a", got)
	}
}
