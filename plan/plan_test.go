package plan_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

// TestChangeJSON checks that a Change reads back as it was written, with
// its Details in place and the action by name, and that one without
// Details reads as the zero Details.
func TestChangeJSON(t *testing.T) {
	n := int64(3)
	a := topology.Address{Kind: topology.KindQueue, Vhost: "/", Name: "orders"}
	for _, c := range []plan.Change{
		{Action: plan.Create, Address: a},
		{Action: plan.Delete, Address: a, Details: &plan.Details{Reason: "not in spec", Messages: &n, Owner: "spec shop"}},
		{Action: plan.Migrate, Address: a, Details: &plan.Details{Resumes: true, Pinned: []string{"x-max-length"}}},
	} {
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var got plan.Change
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if diff := cmp.Diff(c, got); diff != "" {
			t.Errorf("%s read back (-want +got):\n%s", b, diff)
		}
		if got.Reason() != c.Reason() || got.Owner() != c.Owner() || got.Resumes() != c.Resumes() {
			t.Errorf("%s: accessors disagree with the fields", b)
		}
	}
	want := `{"action":"delete","address":{"kind":"queue","vhost":"/","name":"orders"},"reason":"not in spec","messages":3,"owner":"spec shop"}`
	b, _ := json.Marshal(plan.Change{Action: plan.Delete, Address: a, Details: &plan.Details{Reason: "not in spec", Messages: &n, Owner: "spec shop"}})
	if string(b) != want {
		t.Errorf("JSON order:\n got %s\nwant %s", b, want)
	}
	var c plan.Change
	if err := json.Unmarshal([]byte(`{"action":"explode"}`), &c); err == nil {
		t.Errorf("unknown action read as %v", c.Action)
	}
}
