package plan_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/cmd/rmqtopo/flagwords"
	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

// managed is rmqtopo's policy of queue q.
func managed(q string, def topology.Args) topology.Policy {
	return topology.Policy{Vhost: "/", Name: contract.QueuePolicy(q), Pattern: contract.ExactPattern(q),
		ApplyTo: "queues", Priority: contract.ManagedPolicyPriority, Definition: def}
}

// TestAdoption: a live queue declared with arguments that the spec now
// leaves to a policy is kept when its effective values are the wanted
// ones, and replaced, with the reason, when a policy cannot get there.
func TestAdoption(t *testing.T) {
	desired := topology.Topology{Vhosts: []string{"/"},
		Queues:   []topology.Queue{queue("w", topology.Args{"x-queue-type": "quorum"})},
		Policies: []topology.Policy{managed("w", topology.Args{"message-ttl": int64(60000), "dead-letter-exchange": "w.dlx"})},
	}
	tests := []struct {
		name string
		live topology.Args
		want []string // the queue's change, as rows() shows it
	}{
		{
			name: "same values as arguments: adopted",
			live: topology.Args{"x-queue-type": "quorum", "x-message-ttl": int64(60000), "x-dead-letter-exchange": "w.dlx"},
			want: []string{"no-op queue \"w\" in vhost \"/\" # adopted: argument x-dead-letter-exchange \"w.dlx\" stays on the queue, the value its policy also gives; a later change of it needs a replace; argument x-message-ttl 60000 stays on the queue as a ceiling (the lower of it and the policy's message-ttl wins); raising message-ttl above 60000 needs a replace"},
		},
		{
			name: "a higher TTL argument is capped by the policy's lower one: adopted",
			live: topology.Args{"x-queue-type": "quorum", "x-message-ttl": int64(120000), "x-dead-letter-exchange": "w.dlx"},
			want: []string{"no-op queue \"w\" in vhost \"/\" # adopted: argument x-dead-letter-exchange \"w.dlx\" stays on the queue, the value its policy also gives; a later change of it needs a replace; argument x-message-ttl 120000 stays on the queue as a ceiling (the lower of it and the policy's message-ttl wins); raising message-ttl above 120000 needs a replace"},
		},
		{
			name: "a lower TTL argument wins over the policy: replace",
			live: topology.Args{"x-queue-type": "quorum", "x-message-ttl": int64(1000)},
			want: []string{`replace queue "w" in vhost "/" # queue argument x-message-ttl 1000 stays on the queue (the lower of argument and policy wins): only a replace gives it message-ttl 60000`},
		},
		{
			name: "another dead-letter exchange argument beats the policy: replace",
			live: topology.Args{"x-queue-type": "quorum", "x-dead-letter-exchange": "old"},
			want: []string{`replace queue "w" in vhost "/" # queue argument x-dead-letter-exchange "old" stays on the queue (a queue argument beats a policy): only a replace gives it dead-letter-exchange "w.dlx"`},
		},
		{
			name: "an argument no policy can set: replace",
			live: topology.Args{"x-queue-type": "quorum", "x-max-priority": int64(3)},
			want: []string{`replace queue "w" in vhost "/" # queue argument x-max-priority is immutable (3 → unset)`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := topology.Topology{Vhosts: []string{"/"}, Queues: []topology.Queue{queue("w", tt.live)},
				Policies: desired.Policies}
			var got []string
			for _, r := range rows(plan.DiffTopology(live, desired, plan.Options{}), true) {
				if strings.Contains(r, `queue "w"`) {
					got = append(got, r)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestPolicyConflicts: user policies that rmqtopo's shadow, or that shadow
// rmqtopo's, and operator policies that cap its limits, become
// diagnostics.
func TestPolicyConflicts(t *testing.T) {
	userLow := policy("catch-all", ".*", topology.Args{"queue-version": int64(2)})
	userHigh := policy("ha", "^w", topology.Args{"max-length": int64(5)})
	userHigh.Priority = 200
	exAll := policy("fed", ".*", topology.Args{"federation-upstream-set": "all"})
	exAll.ApplyTo = "exchanges"
	retryPolicy := topology.Policy{Vhost: "/", Name: contract.ExchangePolicy("w.retry"), Pattern: contract.ExactPattern("w.retry"),
		ApplyTo: "exchanges", Priority: contract.ManagedPolicyPriority, Definition: topology.Args{"alternate-exchange": "w.dlx"}}
	desired := topology.Topology{Vhosts: []string{"/"},
		Exchanges: []topology.Exchange{exchange("w.retry", "headers", nil)},
		Queues:    []topology.Queue{queue("w", nil), queue("v", nil)},
		Policies: []topology.Policy{managed("w", topology.Args{"dead-letter-exchange": "w.dlx"}), managed("v", topology.Args{"max-length": int64(100)}),
			retryPolicy, userHigh},
	}
	live := topology.Topology{Vhosts: []string{"/"}, Policies: []topology.Policy{userLow, exAll}}
	op := policy("cap", ".*", topology.Args{"max-length": int64(10)})
	p := plan.DiffTopology(live, desired, plan.Options{OperatorPolicies: []topology.Policy{op}})
	var got []string
	for _, d := range flagwords.Diagnostics(plan.Check(p, plan.CheckOptions{})) {
		got = append(got, string(d.Severity)+" "+d.Code+" "+d.Message)
	}
	want := []string{
		`info RT022 operator policy "cap" in vhost "/" caps queue "v": effective max-length 10 (the spec wants 100)`,
		`warning RT020 policy "catch-all" (priority 0) in vhost "/" matches queues "v", "w", whose rmqtopo policy (priority 100) wins: its keys queue-version do not apply to them; narrow its pattern to leave them out, or set the attribute in the spec`,
		`warning RT020 policy "fed" (priority 0) in vhost "/" matches exchange "w.retry", whose rmqtopo policy (priority 100) wins: its keys federation-upstream-set do not apply to it; narrow its pattern to leave them out, or set the attribute in the spec`,
		`error RT021 policy "ha" (priority 200) in vhost "/" takes the place of rmqtopo's policy of queue "w": rmqtopo's dead-letter-exchange do not apply, so messages rejected or expired there may be lost; narrow its pattern to leave them out or lower its priority below 100, or re-run with --allow-destroy to accept`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("diagnostics (-want +got):\n%s", diff)
	}
}

// TestManagedPolicyLeavesWithItsAttributes: an rmqtopo policy whose queue
// is still in the spec but no longer needs it is deleted without prune;
// one whose queue left the spec stays with the queue.
func TestManagedPolicyLeavesWithItsAttributes(t *testing.T) {
	pw, pv := managed("w", topology.Args{"max-length": int64(1)}), managed("v", topology.Args{"max-length": int64(1)})
	live := topology.Topology{Vhosts: []string{"/"}, Queues: []topology.Queue{queue("w", nil), queue("v", nil)},
		Policies: []topology.Policy{pw, pv}}
	desired := topology.Topology{Vhosts: []string{"/"}, Queues: []topology.Queue{queue("w", nil)}}
	p := plan.DiffTopology(live, desired, plan.Options{Owned: owned(live)})
	want := []string{`delete policy "rmqtopo.queue.w" in vhost "/" # not in spec`}
	if diff := cmp.Diff(want, rows(p, false)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestReplaceReasonsAreData: why a queue replaces is data of a kind, from
// which the sentence is made; a migration adds its own reason after it.
func TestReplaceReasonsAreData(t *testing.T) {
	desired := topology.Topology{Vhosts: []string{"/"},
		Queues:   []topology.Queue{queue("w", topology.Args{"x-queue-type": "quorum", "x-max-priority": int64(5)})},
		Policies: []topology.Policy{managed("w", topology.Args{"dead-letter-exchange": "w.dlx"})},
	}
	live := topology.Topology{Vhosts: []string{"/"}, Policies: desired.Policies,
		Queues: []topology.Queue{queue("w", topology.Args{"x-queue-type": "quorum", "x-dead-letter-exchange": "old", "x-max-priority": int64(3)})}}
	w := topology.Address{Kind: topology.KindQueue, Vhost: "/", Name: "w"}
	p := plan.DiffTopology(live, desired, plan.Options{Migrate: plan.Migration{Queues: map[topology.Address]bool{w: true}}})
	var got []plan.Reason
	for _, c := range p.Changes {
		if c.Address == w {
			got = c.Reasons()
		}
	}
	want := []plan.Reason{
		{Kind: plan.ReasonArgumentStays, Subject: "x-dead-letter-exchange", Was: `"old"`, Want: `dead-letter-exchange "w.dlx"`, Text: "a queue argument beats a policy"},
		{Kind: plan.ReasonImmutable, Subject: "queue argument x-max-priority", Was: "3", Want: "5"},
		{Kind: plan.ReasonMigrated},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reasons (-want +got):\n%s", diff)
	}
}
