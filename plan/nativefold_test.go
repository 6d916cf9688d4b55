package plan

import (
	"strings"
	"testing"
	"time"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/topology"
)

// inPlace is the desired in-place shape of native queue "q" with delays.
func inPlace(delays ...time.Duration) topology.Topology {
	return topology.Topology{Vhosts: []string{"v"},
		Exchanges: []topology.Exchange{{Vhost: "v", Name: contract.ScheduleExchange, Type: "direct", Durable: true}},
		Queues: []topology.Queue{{Vhost: "v", Name: "q", Durable: true,
			Arguments: topology.NormalizeArgs(map[string]any{"x-queue-type": "quorum", contract.ArgDelayedRetryType: contract.DelayedRetryFailed})}},
		Bindings: []topology.Binding{{Vhost: "v", Source: contract.ScheduleExchange, Destination: "q", DestinationType: topology.DestQueue,
			RoutingKey: "q", Arguments: topology.NormalizeArgs(contract.ScheduleArguments(delays, false))}},
		Policies: []topology.Policy{{Vhost: "v", Name: contract.QueuePolicy("q"), Pattern: "^q$", ApplyTo: "queues",
			Priority: contract.ManagedPolicyPriority, Definition: topology.NormalizeArgs(contract.SchedulePolicy(delays, false))}}}
}

// earlier is a live native queue "q" of the earlier shape: its schedule in
// its arguments, no policy, no schedule binding.
func earlier(delays ...time.Duration) topology.Topology {
	args := map[string]any{"x-queue-type": "quorum"}
	for k, v := range contract.NativeArguments(delays, false) {
		args[k] = v
	}
	return topology.Topology{Vhosts: []string{"v"}, Queues: []topology.Queue{{Vhost: "v", Name: "q", Durable: true, Arguments: topology.NormalizeArgs(args)}}}
}

// TestNativeEarlierShapeKept: a live native queue of the earlier shape is
// kept as it is (nothing planned) for the same schedule, replaced with a
// note for another, and migrated (into the in-place shape) with migrate;
// a queue of the in-place shape changes its schedule in place.
func TestNativeEarlierShapeKept(t *testing.T) {
	s3, s4 := 3*time.Second, 4*time.Second
	q := topology.Address{Kind: topology.KindQueue, Vhost: "v", Name: "q"}
	for _, c := range []struct {
		name          string
		live, desired topology.Topology
		migrate       bool
		want          string // the queue's action, "" for none
		note          bool
	}{
		{"same schedule", earlier(s3, s3), inPlace(s3, s3), false, "", true},
		{"schedule change", earlier(s3, s3), inPlace(s3, s4), false, "replace", true},
		{"migrate", earlier(s3, s3), inPlace(s3, s4), true, "any", false},
		{"in place", inPlace(s3, s3), inPlace(s3, s4), false, "", false},
	} {
		opts := Options{}
		if c.migrate {
			opts.Migrate.Queues = map[topology.Address]bool{q: true}
		}
		p := DiffTopology(c.live, c.desired, opts)
		got, note := "", false
		for _, ch := range p.Changes {
			if ch.Address == q {
				if ch.Action != NoOp {
					got = strings.ToLower(ch.Action.String())
				}
				note = strings.Contains(changeReasons(ch), "migrates it to the in-place shape")
			}
			if c.name != "in place" && !c.migrate && ch.Action != NoOp && ch.Address != q {
				t.Errorf("%s: %s %s; the earlier shape wants no policy or binding", c.name, ch.Action, ch.Address)
			}
		}
		if c.want == "any" && got != "" {
			got = "any"
		}
		if got != c.want || note != c.note {
			t.Errorf("%s: queue %q, note %v; want %q, note %v", c.name, got, note, c.want, c.note)
		}
	}
}

func changeReasons(c Change) string {
	var b strings.Builder
	for _, r := range c.details().Reasons {
		b.WriteString(r.String())
	}
	return b.String()
}
