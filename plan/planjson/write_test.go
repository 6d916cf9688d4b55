package planjson

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

// TestWriteStreamed checks that Write, which writes a change at a time,
// writes what encoding/json writes for the whole documentJSON, and that
// Document's MarshalJSON and UnmarshalJSON agree with it.
func TestWriteStreamed(t *testing.T) {
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
		"changes":      {plan.Plan{Changes: changes}, diags},
		"no-ops only":  {plan.Plan{Changes: changes[1:2]}, nil},
		"empty":        {plan.Plan{}, nil},
		"all creates":  {plan.Plan{Changes: changes[:1]}, diags},
		"diagnostics":  {plan.Plan{}, diags},
		"one deletion": {plan.Plan{Changes: changes[3:]}, nil},
	} {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		doc := NewDocument(tc.p, tc.diags)
		whole := head(doc)
		whole.Changes = jsonChanges(doc.Changes)
		if err := enc.Encode(whole); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := Write(&got, doc); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want.String(), got.String()); diff != "" {
			t.Errorf("%s: streamed JSON differs from the whole document (-want +got):\n%s", name, diff)
		}
		var back Document
		if err := json.Unmarshal(got.Bytes(), &back); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var again bytes.Buffer
		if err := Write(&again, back); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(got.String(), again.String()); diff != "" {
			t.Errorf("%s: read back and written again (-want +got):\n%s", name, diff)
		}
	}
}
