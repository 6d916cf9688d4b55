package plan_test

import (
	"strings"
	"testing"

	"github.com/rmqtopo/rmqtopo/internal/shapetest"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

func expandFor(t *testing.T, release, yaml string) topology.Topology {
	t.Helper()
	f, err := spec.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("spec does not parse: %v\n%s", err, yaml)
	}
	v, _ := topology.ParseVersion(release)
	return spec.ExpandFor(v, f)
}

const limitSpec = `
version: 1
vhost: v
queues:
  - {name: work, type: quorum, dlq: true, retry: {delays: [1s, 5s]}%s}
`

func withLimit(limit string) string {
	if limit == "" {
		return strings.Replace(limitSpec, "%s", "", 1)
	}
	return strings.Replace(limitSpec, "%s", ", delivery_limit: "+limit, 1)
}

// changes lists the plan's changes other than no-ops, and its replaces.
func changes(p plan.Plan) (all, replaced []string) {
	for _, c := range p.Changes {
		if c.Action == plan.NoOp {
			continue
		}
		all = append(all, string(c.Action)+" "+c.Address.String())
		if c.Action == plan.Replace {
			replaced = append(replaced, c.Address.Name+": "+c.Reason())
		}
	}
	return all, replaced
}

// TestUpgradeFrom3xPlansInPlace (issue 34, point 4): a broker applied on
// 3.x (its queues declared with x-delivery-limit 20) and upgraded to 4.x
// plans no change for the same spec, and lowering the limit is a policy
// update; raising it above the argument the queue keeps needs a replace,
// which the plan says is the argument's doing. On a 4.x broker whose
// queues were declared without the argument, raising the limit is a
// policy update too, and a spec expanded for an unknown release (status,
// import) plans no change there either.
func TestUpgradeFrom3xPlansInPlace(t *testing.T) {
	on3 := expandFor(t, "3.13.7", withLimit(""))
	v4 := topology.Version{Major: 4, Minor: 0, Patch: 5}
	for _, c := range []struct {
		name     string
		live     topology.Topology
		desired  topology.Topology
		replaced bool
	}{
		{"upgraded, same spec", on3, expandFor(t, "4.0.5", withLimit("")), false},
		{"upgraded, limit lowered", on3, expandFor(t, "4.0.5", withLimit("10")), false},
		{"upgraded, limit raised", on3, expandFor(t, "4.0.5", withLimit("50")), true},
		{"made on 4.x, limit raised", expandFor(t, "4.0.5", withLimit("")), expandFor(t, "4.0.5", withLimit("50")), false},
		{"made on 4.x, unknown release", expandFor(t, "4.3.6", withLimit("")), expandFor(t, "", withLimit("")), false},
		// An earlier rmqtopo's shape: dead-lettering and the limit in the
		// queue's own policy.
		{"per-queue policies, upgraded", shapetest.Legacy(on3), expandFor(t, "4.0.5", withLimit("")), false},
		{"per-queue policies, unknown release", shapetest.Legacy(on3), expandFor(t, "", withLimit("")), false},
	} {
		p := plan.DiffTopology(c.live, c.desired, plan.Options{Release: v4})
		all, replaced := changes(p)
		if (len(replaced) > 0) != c.replaced {
			t.Errorf("%s: changes %v, replaces %v", c.name, all, replaced)
		}
		for _, r := range replaced {
			if !strings.Contains(r, "x-delivery-limit 20 stays on the queue") {
				t.Errorf("%s: replace %s", c.name, r)
			}
		}
		for _, a := range all {
			if !strings.Contains(a, "policy") && !c.replaced {
				t.Errorf("%s: %s, want only policy changes", c.name, a)
			}
		}
		if strings.Contains(c.name, "per-queue") && len(all) > 0 {
			t.Errorf("%s: %v, want no change", c.name, all)
		}
	}
	// Without the release (a 3.x broker) the 4.x shape is not the 3.x one.
	if _, replaced := changes(plan.DiffTopology(on3, expandFor(t, "4.0.5", withLimit("")), plan.Options{})); len(replaced) == 0 {
		t.Error("an unknown release took x-delivery-limit 20 for its default")
	}
}

// TestDLQToggle (docs/versions.md): turning dlq on keeps the queue, its
// dead-lettering in its policy; turning it off needs a replace, since the
// broker cannot drop the queue's x-dead-letter-exchange argument.
func TestDLQToggle(t *testing.T) {
	const s = "version: 1\nvhost: v\nqueues:\n  - {name: work, type: quorum, dlq: %s, retry: {delays: [1s]}}\n"
	for _, release := range []string{"3.10.8", "4.0.5"} {
		on := expandFor(t, release, strings.Replace(s, "%s", "true", 1))
		off := expandFor(t, release, strings.Replace(s, "%s", "false", 1))
		v, _ := topology.ParseVersion(release)
		if _, replaced := changes(plan.DiffTopology(off, on, plan.Options{Release: v})); len(replaced) != 0 {
			t.Errorf("%s: dlq turned on replaces %v", release, replaced)
		}
		if _, replaced := changes(plan.DiffTopology(on, off, plan.Options{Release: v})); len(replaced) != 1 {
			t.Errorf("%s: dlq turned off replaces %v, want the work queue", release, replaced)
		}
	}
}
