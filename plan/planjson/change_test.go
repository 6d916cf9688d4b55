package planjson_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/plan/planjson"
	"github.com/rmqtopo/rmqtopo/topology"
)

// TestChangeJSON checks that a plan.Change reads back as it was written, with
// its Details in place and the action by name, and that one without
// Details reads as the zero Details.
func TestChangeJSON(t *testing.T) {
	n := int64(3)
	a := topology.Address{Kind: topology.KindQueue, Vhost: "/", Name: "orders"}
	for _, c := range []plan.Change{
		{Action: plan.Create, Address: a},
		{Action: plan.Delete, Address: a, Details: &plan.Details{Reasons: []plan.Reason{{Kind: plan.ReasonText, Text: "not in spec"}}, Messages: &n, Owner: "spec shop"}},
		{Action: plan.Migrate, Address: a, Details: &plan.Details{Why: plan.WhyResumes, Pinned: []string{"x-max-length"}}},
		{Action: plan.Delete, Address: a, Details: &plan.Details{Why: plan.WhyMayDelete, Owner: "unknown"}},
		{Action: plan.NoOp, Address: a, Details: &plan.Details{Why: plan.WhyLeftBehind, Messages: &n}},
		{Action: plan.NoOp, Address: a, Details: &plan.Details{Why: plan.WhyDraining}},
	} {
		b, err := json.Marshal(planjson.ChangeOf(c))
		if err != nil {
			t.Fatal(err)
		}
		var j planjson.Change
		if err := json.Unmarshal(b, &j); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		got := j.Plan()
		if diff := cmp.Diff(c, got); diff != "" {
			t.Errorf("%s read back (-want +got):\n%s", b, diff)
		}
		if got.Reason() != c.Reason() || got.Owner() != c.Owner() || got.Why() != c.Why() {
			t.Errorf("%s: accessors disagree with the fields", b)
		}
	}
	want := `{"action":"delete","address":{"kind":"queue","vhost":"/","name":"orders"},"reason":"not in spec","messages":3,"owner":"spec shop"}`
	b, _ := json.Marshal(planjson.ChangeOf(plan.Change{Action: plan.Delete, Address: a, Details: &plan.Details{Reasons: []plan.Reason{{Kind: plan.ReasonNotInSpec}}, Messages: &n, Owner: "spec shop"}}))
	if string(b) != want {
		t.Errorf("JSON order:\n got %s\nwant %s", b, want)
	}
	// Why shows as the boolean it replaced, where that boolean was.
	for why, want := range map[plan.Why]string{
		plan.WhyResumes:    `{"action":"migrate","address":{"kind":"queue","vhost":"/","name":"orders"},"messages":3,"resumes":true,"owner":"spec shop"}`,
		plan.WhyMayDelete:  `{"action":"migrate","address":{"kind":"queue","vhost":"/","name":"orders"},"messages":3,"owner":"spec shop","may_delete":true}`,
		plan.WhyLeftBehind: `{"action":"migrate","address":{"kind":"queue","vhost":"/","name":"orders"},"messages":3,"owner":"spec shop","left_behind":true,"pinned":["x"]}`,
		plan.WhyDraining:   `{"action":"migrate","address":{"kind":"queue","vhost":"/","name":"orders"},"messages":3,"owner":"spec shop","draining":true,"pinned":["x"]}`,
	} {
		d := &plan.Details{Why: why, Messages: &n, Owner: "spec shop"}
		if why == plan.WhyLeftBehind || why == plan.WhyDraining {
			d.Pinned = []string{"x"}
		}
		if b, _ := json.Marshal(planjson.ChangeOf(plan.Change{Action: plan.Migrate, Address: a, Details: d})); string(b) != want {
			t.Errorf("JSON of Why %d:\n got %s\nwant %s", why, b, want)
		}
	}
	var c planjson.Change
	if err := json.Unmarshal([]byte(`{"action":"explode"}`), &c); err == nil {
		t.Errorf("unknown action read as %v", c.Action)
	}
}
