package plan_test

import (
	"strings"
	"testing"

	"github.com/rmqtopo/rmqtopo/cmd/rmqtopo/flagwords"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

// TestLeftBehindQueue: a queue this spec owned that left the spec is kept
// without --prune, and the plan says so with its count and the command
// that removes it (RT013); with --prune it is a delete instead.
func TestLeftBehindQueue(t *testing.T) {
	live := topology.Topology{Vhosts: []string{"/"}, Queues: []topology.Queue{queue("gone", nil), queue("kept", nil)}}
	desired := topology.Topology{Vhosts: []string{"/"}, Queues: []topology.Queue{queue("kept", nil)}}
	gone := queue("gone", nil).Addr()
	for _, tt := range []struct {
		name     string
		messages map[topology.Address]int64
		want     string
	}{
		{"holding messages", map[topology.Address]int64{gone: 7}, "it holds 7 messages; drain it, or rmqtopo apply --prune --allow-destroy SPEC removes it with them"},
		{"empty", map[topology.Address]int64{gone: 0}, "it holds no messages; rmqtopo apply --prune SPEC removes it"},
		{"count unknown", nil, "its message count is unknown; drain it, or rmqtopo apply --prune --allow-destroy"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := plan.DiffTopology(live, desired, plan.Options{Owned: owned(live), Messages: tt.messages})
			if p.HasChanges() {
				t.Errorf("a kept queue is a change: %+v", p.Changes)
			}
			var found bool
			for _, d := range flagwords.Diagnostics(plan.Check(p, plan.CheckOptions{})) {
				if d.Code == plan.CodeQueueLeftBehind && d.Address == gone {
					found = true
					if d.Severity != plan.SeverityWarning || !strings.Contains(d.Message, tt.want) {
						t.Errorf("RT013 = %+v, want a warning containing %q", d, tt.want)
					}
				}
			}
			if !found {
				t.Errorf("no RT013 for the left-behind queue")
			}
		})
	}
	p := plan.DiffTopology(live, desired, plan.Options{Owned: owned(live), Prune: true, Messages: map[topology.Address]int64{gone: 0}})
	if len(p.Changes) == 0 || p.Changes[len(p.Changes)-1].Action != plan.Delete {
		t.Errorf("with prune, the queue is not deleted: %+v", p.Changes)
	}
	// A queue rmqtopo does not own is nobody's business: no warning.
	p = plan.DiffTopology(live, desired, plan.Options{})
	for _, d := range plan.Check(p, plan.CheckOptions{}) {
		if d.Code == plan.CodeQueueLeftBehind {
			t.Errorf("RT013 for a queue rmqtopo does not own: %+v", d)
		}
	}
}
