package render

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

// TestPlanJSONStreamed checks that PlanJSON, which writes a change at a
// time, writes what encoding/json writes for the whole document.
func TestPlanJSONStreamed(t *testing.T) {
	n := int64(7)
	q := topology.Queue{Vhost: "/", Name: "a<b>&c → d", Durable: true, Arguments: topology.Args{"x-queue-type": "quorum", "x-max-length": 10}}
	b := topology.Binding{Vhost: "/", Source: "ex", Destination: q.Name, DestinationType: topology.DestQueue, RoutingKey: "k.#"}
	changes := []plan.Change{
		{Action: plan.Create, Address: q.Addr(), After: &plan.Object{Queue: &q}},
		{Action: plan.NoOp, Address: topology.Address{Kind: topology.KindVhost, Name: "/"}},
		{Action: plan.Create, Address: b.Addr(), After: &plan.Object{Binding: &b}},
		{Action: plan.Delete, Address: q.Addr(), Before: &plan.Object{Queue: &q},
			Details: &plan.Details{Reasons: []plan.Reason{{Kind: plan.ReasonText, Text: "not in spec; \"quoted\""}}, Messages: &n, Owner: "spec <shop>"}},
	}
	diags := []plan.Diagnostic{{Code: "RT001", Severity: plan.SeverityError, Address: q.Addr(), Message: "deleting <it> destroys 7 messages"}}
	for name, tc := range map[string]struct {
		p     plan.Plan
		diags []plan.Diagnostic
	}{
		"changes":      {plan.Plan{FormatVersion: plan.FormatVersion, Changes: changes}, diags},
		"no-ops only":  {plan.Plan{FormatVersion: plan.FormatVersion, Changes: changes[1:2]}, nil},
		"empty":        {plan.Plan{FormatVersion: plan.FormatVersion}, nil},
		"all creates":  {plan.Plan{FormatVersion: plan.FormatVersion, Changes: changes[:1]}, diags},
		"diagnostics":  {plan.Plan{FormatVersion: plan.FormatVersion}, diags},
		"one deletion": {plan.Plan{FormatVersion: plan.FormatVersion, Changes: changes[3:]}, nil},
	} {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(plan.NewDocument(tc.p, tc.diags)); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := PlanJSON(&got, tc.p, tc.diags); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want.String(), got.String()); diff != "" {
			t.Errorf("%s: streamed JSON differs from the whole document (-want +got):\n%s", name, diff)
		}
	}
}
