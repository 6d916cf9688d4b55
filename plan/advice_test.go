package plan_test

import (
	"strings"
	"testing"

	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

// adviceCase is a spec that draws diagnostic code, whose message gives
// advice; each fix is the spec with that advice followed, which must
// validate and must no longer draw the code.
type adviceCase struct {
	name    string
	version string
	code    string
	advice  string // a part of the message: the advice the fixes follow
	spec    string // the queues, under "queues:"
	policy  string // the spec's policies, under "policies:"; none when empty
	fixes   map[string]string
	// live, when set, is the topology of spec already on the broker, so
	// that a fix is also judged as a change of a live queue.
	live bool
}

// planSpec validates and plans queues (and policies) of vhost v as plan
// does for RabbitMQ version: layout auto resolved, expanded for the
// version, diffed against live (nothing when nil), judged by the version.
// It returns the plan's changes, its diagnostics and the desired topology.
func planSpec(t *testing.T, version, queues, policies string, live *topology.State) ([]plan.Change, []plan.Diagnostic, topology.Topology) {
	t.Helper()
	src := "version: 1\nvhost: v\nqueues:\n" + queues
	if policies != "" {
		src += "policies:\n" + policies
	}
	f, err := spec.Parse("s.yaml", []byte(src))
	if err != nil {
		t.Fatalf("the spec does not validate: %v\n%s", err, src)
	}
	v, err := topology.ParseVersion(version)
	if err != nil {
		t.Fatal(err)
	}
	if live == nil {
		live = topology.NewState([]string{"v"})
	}
	spec.Resolve([]*spec.File{f}, spec.Target{RabbitMQ: v, Live: &live.Topology})
	desired := spec.ExpandFor(v, f)
	p := plan.Diff(live, desired, plan.Choices{})
	p.RabbitMQ = &plan.Judged{Version: v.String(), From: plan.FromOverride}
	return p.Changes, plan.Check(p, plan.CheckOptions{State: live}), desired
}

func withCode(ds []plan.Diagnostic, code string) []plan.Diagnostic {
	var out []plan.Diagnostic
	for _, d := range ds {
		if d.Code == code {
			out = append(out, d)
		}
	}
	return out
}

// TestAdviceClearsTheDiagnostic (issue 43, point 4): following the advice
// of a diagnostic makes it go away, with a spec that validates; the
// advice, on a raw queue, names nothing validation refuses there.
func TestAdviceClearsTheDiagnostic(t *testing.T) {
	for _, c := range adviceCases {
		t.Run(c.name, func(t *testing.T) {
			_, ds, desired := planSpec(t, c.version, c.spec, c.policy, nil)
			got := withCode(ds, c.code)
			if len(got) != 1 || !strings.Contains(got[0].Message, c.advice) {
				t.Fatalf("want one %s advising %q, got %+v", c.code, c.advice, ds)
			}
			var live *topology.State
			if c.live {
				live = topology.NewState([]string{"v"})
				live.Topology = desired
			}
			for name, fixed := range c.fixes {
				changes, ds, _ := planSpec(t, c.version, fixed, c.policy, live)
				if left := withCode(ds, c.code); len(left) > 0 {
					t.Errorf("%s: still %+v", name, left)
				}
				if c.live {
					for _, ch := range changes {
						if ch.Action == plan.Replace && strings.Contains(c.advice, "in place") && strings.Contains(name, "policy") {
							t.Errorf("%s: %s, where the advice says in place", name, ch.Address)
						}
					}
				}
			}
		})
	}
}

var adviceCases = []adviceCase{
	{
		name: "RT101 raw work queue", version: "4.0.5", code: plan.CodeDefaultDeliveryLimit,
		advice: "add x-delivery-limit to its arguments (a raw queue takes no delivery_limit) or a policy with delivery-limit, which a live queue takes in place",
		spec:   "  - {name: votes, raw: true, type: quorum}\n",
		live:   true,
		fixes: map[string]string{
			"argument": "  - {name: votes, raw: true, type: quorum, arguments: {x-delivery-limit: 50}}\n",
			"policy": "  - {name: votes, raw: true, type: quorum}\n" +
				"policies:\n  - {name: votes-limit, pattern: '^votes$', definition: {delivery-limit: 50}}\n",
		},
	},
	{
		name: "RT106 native below 4.3.1", version: "4.0.5", code: plan.CodeNativeNeedsVersion,
		advice: "nothing is written until the spec changes (layout auto, or shared)",
		spec:   "  - {name: work, type: quorum, layout: native, retry: {delays: [1s, 5s]}}\n",
		fixes: map[string]string{
			"auto":   "  - {name: work, type: quorum, layout: auto, retry: {delays: [1s, 5s]}}\n",
			"shared": "  - {name: work, type: quorum, layout: shared, retry: {delays: [1s, 5s]}}\n",
		},
	},
	{
		name: "RT103 x-queue-version 1", version: "4.3.0", code: plan.CodeRefusedArgument,
		advice: "use 2 or drop the argument",
		spec:   "  - {name: old, raw: true, arguments: {x-queue-version: 1}}\n",
		fixes: map[string]string{
			"2":    "  - {name: old, raw: true, arguments: {x-queue-version: 2}}\n",
			"drop": "  - {name: old, raw: true}\n",
		},
	},
	{
		name: "RT103 x-queue-master-locator", version: "4.3.0", code: plan.CodeRefusedArgument,
		advice: "use x-queue-leader-locator",
		spec:   "  - {name: old, raw: true, arguments: {x-queue-master-locator: client-local}}\n",
		fixes: map[string]string{
			"leader": "  - {name: old, raw: true, arguments: {x-queue-leader-locator: client-local}}\n",
		},
	},
	{
		name: "RT105 x-queue-mode", version: "4.0.5", code: plan.CodeQueueModeIgnored,
		advice: "drop it",
		spec:   "  - {name: lazy, raw: true, arguments: {x-queue-mode: lazy}}\n",
		fixes: map[string]string{
			"drop": "  - {name: lazy, raw: true}\n",
		},
	},
}

// TestNoDeliveryLimitWarningOnAHandMadeWaitQueue (issue 43, point 4): a
// hand-made TTL retry queue dead-letters its messages back when they
// expire and has no consumers: RT101 is only for its work queue.
func TestNoDeliveryLimitWarningOnAHandMadeWaitQueue(t *testing.T) {
	_, ds, _ := planSpec(t, "4.3.6", `  - name: invoice.create
    raw: true
    type: quorum
    arguments: {x-dead-letter-exchange: "", x-dead-letter-routing-key: invoice.create.failed}
  - name: invoice.create.retry
    raw: true
    type: quorum
    arguments: {x-message-ttl: 5000, x-dead-letter-exchange: "", x-dead-letter-routing-key: invoice.create}
`, "", nil)
	got := withCode(ds, plan.CodeDefaultDeliveryLimit)
	if len(got) != 1 || got[0].Address.Name != "invoice.create" {
		t.Errorf("RT101 %+v, want one, for the work queue invoice.create", got)
	}
}
