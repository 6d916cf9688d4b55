package spec

import (
	"testing"

	"github.com/rmqtopo/rmqtopo/topology"
)

// TestExpandForRelease (issue 34, point 4): on 4.0+ no queue is declared
// with x-delivery-limit 20, the broker's own default, so that a later
// delivery_limit is a policy update; before 4.0, and for an unknown
// release, the queues that take rmqtopo's default carry it. DLQs keep
// their own limit on every release.
func TestExpandForRelease(t *testing.T) {
	f, err := Parse("s.yaml", []byte(`version: 1
queues:
  - name: work
    type: quorum
    dlq: true
    return_queue: true
    retry: {delays: [1s, 5s]}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		release string
		want    any // x-delivery-limit of work, its wait queues and return queue
	}{
		{"", int64(DefaultDeliveryLimit)},
		{"3.10.8", int64(DefaultDeliveryLimit)},
		{"3.13.7", int64(DefaultDeliveryLimit)},
		{"4.0.5", nil},
		{"4.3.6", nil},
	} {
		v, _ := topology.ParseVersion(c.release)
		got := ExpandFor(v, f)
		if !DeclaresAlike(v, topology.Version{}) != (c.want == nil) {
			t.Errorf("%s: DeclaresAlike disagrees with the expansion", c.release)
		}
		for _, q := range got.Queues {
			limit, set := q.Arguments["x-delivery-limit"]
			switch {
			case q.Name == "work.dlq":
				if limit != int64(DeadEndDeliveryLimit) {
					t.Errorf("%s: %s has x-delivery-limit %v, want %d", c.release, q.Name, limit, DeadEndDeliveryLimit)
				}
			case c.want == nil && set, c.want != nil && limit != c.want:
				t.Errorf("%s: %s has x-delivery-limit %v (set %t), want %v", c.release, q.Name, limit, set, c.want)
			}
		}
		if len(got.Policies) != 0 {
			t.Errorf("%s: policies %v, want none (the spec sets no attribute that changes)", c.release, got.Policies)
		}
	}
}

// TestDeadLetteringOneRule: a quorum work queue's dead-lettering is the
// same rule as arguments (rmqtopo's own contract) and as policy keys (a
// preset's work queue).
func TestDeadLetteringOneRule(t *testing.T) {
	args := map[string]any{"x-queue-type": TypeQuorum}
	deadLetterTo(args, "q.dlx", nil)
	def := map[string]any{}
	deadLetterPolicy(def, TypeQuorum, "q.dlx", nil)
	if len(def) != 3 || len(args) != 4 {
		t.Fatalf("arguments %v, policy %v", args, def)
	}
	for k, v := range def {
		if args["x-"+k] != v {
			t.Errorf("policy key %s %v, argument %v", k, v, args["x-"+k])
		}
		if f, ok := topology.LookupFeature(topology.FeatureQueueArgument, "x-"+k, nil); !ok || f.Policy != k {
			t.Errorf("the key table does not pair x-%s with %s", k, k)
		}
	}
}
