package plan_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/cmd/rmqtopo/flagwords"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

// TestRetiredQueue (issue 43 point 1): a hand-made queue the spec retires
// is in no record, yet the plan names it while it may hold messages
// (RT014, "delete with --prune once empty"), keeps it even with prune
// until its count is 0, deletes it then, and never when another spec
// claims it; a hand-made queue the spec does not retire stays nobody's.
func TestRetiredQueue(t *testing.T) {
	live := topology.Topology{Vhosts: []string{"/"}, Queues: []topology.Queue{queue("work", nil), queue("work.retry", nil), queue("other", nil)}}
	desired := topology.Topology{Vhosts: []string{"/"}, Queues: []topology.Queue{queue("work", nil)}}
	retry := queue("work.retry", nil).Addr()
	retire := map[topology.Address]bool{retry: true}
	for _, tt := range []struct {
		name     string
		prune    bool
		messages map[topology.Address]int64
		deleted  bool
		want     string // in RT014; "" for none
	}{
		{"holding, no prune", false, map[topology.Address]int64{retry: 4}, false, "it holds 4 messages, which go on as the queue sends them (a TTL queue dead-letters them back at their time); delete with --prune once empty"},
		{"empty, no prune", false, map[topology.Address]int64{retry: 0}, false, "it holds 0 messages"},
		{"count unknown, no prune", false, nil, false, "its message count is unknown"},
		{"holding, prune", true, map[topology.Address]int64{retry: 4}, false, "it holds 4 messages, which go on as the queue sends them (a TTL queue dead-letters them back at their time); kept until it is empty, and a pruning apply deletes it then"},
		{"count unknown, prune", true, nil, false, "its message count is unknown"},
		{"empty, prune", true, map[topology.Address]int64{retry: 0}, true, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := plan.DiffTopology(live, desired, plan.Options{Retire: retire, Prune: tt.prune, Messages: tt.messages})
			var c *plan.Change
			for i := range p.Changes {
				if p.Changes[i].Address == retry {
					c = &p.Changes[i]
				}
				if p.Changes[i].Address.Name == "other" {
					t.Errorf("a hand-made queue the spec does not retire is in the plan: %+v", p.Changes[i])
				}
			}
			switch {
			case c == nil:
				t.Fatalf("the retired queue is not in the plan: %+v", p.Changes)
			case c.Why() != plan.WhyRetired:
				t.Errorf("why = %v, want WhyRetired", c.Why())
			case tt.deleted != (c.Action == plan.Delete):
				t.Errorf("action %v, want deleted %v", c.Action, tt.deleted)
			case !tt.deleted && c.Action != plan.NoOp:
				t.Errorf("action %v, want no-op", c.Action)
			}
			var got []plan.Diagnostic
			for _, d := range flagwords.Diagnostics(plan.Check(p, plan.CheckOptions{})) {
				if d.Code == plan.CodeQueueRetired {
					got = append(got, d)
				}
			}
			if tt.want == "" {
				if len(got) != 0 {
					t.Errorf("RT014 for a deleted queue: %+v", got)
				}
				return
			}
			if len(got) != 1 || got[0].Severity != plan.SeverityInfo || !strings.Contains(got[0].Message, tt.want) ||
				!strings.HasPrefix(got[0].Message, `retired: queue "work.retry"`) {
				t.Errorf("RT014 = %+v, want one info containing %q", got, tt.want)
			}
		})
	}
	// Claimed by another spec's record: never this spec's to delete.
	p := plan.DiffTopology(live, desired, plan.Options{Retire: retire, Prune: true, Messages: map[topology.Address]int64{retry: 0},
		Others: map[topology.Address][]string{retry: {"team-b"}}})
	for _, c := range p.Changes {
		if c.Address == retry {
			t.Errorf("a retired queue another spec claims is planned: %+v", c)
		}
	}
}

// TestRetiredQueueDrainsBeforeMigration: a migration of a queue into which
// a retired queue dead-letters by name (default exchange) waits for it
// (WaitFor, kept in the JSON plan); one through an exchange, or a queue
// the spec does not retire, does not.
func TestRetiredQueueDrainsBeforeMigration(t *testing.T) {
	byName := func(name, into string) topology.Queue {
		return queue(name, topology.Args{"x-message-ttl": int64(5000), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": into})
	}
	live := topology.Topology{Vhosts: []string{"/"}, Queues: []topology.Queue{
		queue("work", topology.Args{"x-dead-letter-exchange": ""}), byName("work.retry", "work"), byName("stray", "work"),
		queue("work.x", topology.Args{"x-message-ttl": int64(5000), "x-dead-letter-exchange": "back"}),
	}}
	desired := topology.Topology{Vhosts: []string{"/"}, Queues: []topology.Queue{queue("work", nil)}}
	retire := map[topology.Address]bool{byName("work.retry", "work").Addr(): true, queue("work.x", nil).Addr(): true}
	work := queue("work", nil).Addr()
	p := plan.DiffTopology(live, desired, plan.Options{Retire: retire, Migrate: plan.Migration{All: true}})
	for _, c := range p.Changes {
		if c.Address != work {
			continue
		}
		if c.Action != plan.Migrate {
			t.Fatalf("work: %v, want migrate", c.Action)
		}
		if diff := cmp.Diff([]string{"work.retry"}, c.WaitFor()); diff != "" {
			t.Errorf("WaitFor (-want +got):\n%s", diff)
		}
		data, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var back plan.Change
		if err := json.Unmarshal(data, &back); err != nil || !slices.Equal(back.WaitFor(), c.WaitFor()) {
			t.Errorf("read back from %s: %v, %v", data, back.WaitFor(), err)
		}
		return
	}
	t.Fatalf("no change of work: %+v", p.Changes)
}
