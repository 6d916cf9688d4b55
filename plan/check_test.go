package plan_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/cmd/rmqtopo/flagwords"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

func TestCheck(t *testing.T) {
	ordersAddr := orders.Addr()
	shopAddr := shop.Addr()
	waitAddr := wait10s.Addr()
	tests := []struct {
		name    string
		changes []plan.Change
		// want and wantAllowed are the diagnostics without and with
		// AllowDestroy.
		want, wantAllowed []plan.Diagnostic
	}{
		{
			name: "no diagnostics for creates, updates, no-ops and safe deletes",
			changes: []plan.Change{
				{Action: plan.Create, Address: ordersAddr},
				{Action: plan.Update, Address: ttlPolicy.Addr()},
				{Action: plan.NoOp, Address: shopAddr},
				{Action: plan.Delete, Address: shopAddr},
				{Action: plan.Delete, Address: shopOrders.Addr()},
				{Action: plan.Delete, Address: waitAddr, Details: &plan.Details{Messages: ptr(int64(0))}},
				{Action: plan.Replace, Address: ordersAddr, Details: &plan.Details{Messages: ptr(int64(0))}},
			},
		},
		{
			name:    "RT001 replace of a queue holding messages",
			changes: []plan.Change{{Action: plan.Replace, Address: ordersAddr, Details: &plan.Details{Messages: ptr(int64(42))}}},
			want: []plan.Diagnostic{{Code: "RT001", Severity: plan.SeverityError, Address: ordersAddr, Messages: 42,
				Message: `replacing queue "orders" in vhost "/" destroys 42 messages; re-run with --allow-destroy to accept, or --migrate to keep them (see RT030)`}},
			wantAllowed: []plan.Diagnostic{{Code: "RT001", Severity: plan.SeverityWarning, Address: ordersAddr, Messages: 42,
				Message: `replacing queue "orders" in vhost "/" destroys 42 messages (accepted with --allow-destroy)`}},
		},
		{
			name:    "RT002 delete of a queue holding messages",
			changes: []plan.Change{{Action: plan.Delete, Address: ordersAddr, Details: &plan.Details{Messages: ptr(int64(1))}}},
			want: []plan.Diagnostic{{Code: "RT002", Severity: plan.SeverityError, Address: ordersAddr, Messages: 1,
				Message: `deleting queue "orders" in vhost "/" destroys 1 message; re-run with --allow-destroy to accept`}},
			wantAllowed: []plan.Diagnostic{{Code: "RT002", Severity: plan.SeverityWarning, Address: ordersAddr, Messages: 1,
				Message: `deleting queue "orders" in vhost "/" destroys 1 message (accepted with --allow-destroy)`}},
		},
		{
			name: "RT003 queue replace or delete with an unknown message count",
			changes: []plan.Change{
				{Action: plan.Replace, Address: ordersAddr},
				{Action: plan.Delete, Address: waitAddr},
			},
			want: []plan.Diagnostic{
				{Code: "RT003", Severity: plan.SeverityError, Address: ordersAddr,
					Message: `replacing queue "orders" in vhost "/" may destroy messages: its message count is unknown; re-run with --allow-destroy to accept, or --migrate to keep them (see RT030)`},
				{Code: "RT003", Severity: plan.SeverityError, Address: waitAddr,
					Message: `deleting queue "orders.wait.1.10s" in vhost "/" may destroy messages: its message count is unknown; re-run with --allow-destroy to accept`},
			},
			wantAllowed: []plan.Diagnostic{
				{Code: "RT003", Severity: plan.SeverityWarning, Address: ordersAddr,
					Message: `replacing queue "orders" in vhost "/" may destroy messages: its message count is unknown (accepted with --allow-destroy)`},
				{Code: "RT003", Severity: plan.SeverityWarning, Address: waitAddr,
					Message: `deleting queue "orders.wait.1.10s" in vhost "/" may destroy messages: its message count is unknown (accepted with --allow-destroy)`},
			},
		},
		{
			name: "RT004 retired wait queue draining",
			changes: []plan.Change{
				{Action: plan.NoOp, Address: waitAddr, Details: &plan.Details{Messages: ptr(int64(7)), Why: plan.WhyDraining}},
				{Action: plan.NoOp, Address: ordersAddr, Details: &plan.Details{Why: plan.WhyDraining}},
			},
			want: []plan.Diagnostic{
				{Code: "RT004", Severity: plan.SeverityInfo, Address: waitAddr, Messages: 7,
					Message: `retired wait queue "orders.wait.1.10s" in vhost "/" is draining: 7 messages waiting; a later apply deletes it once empty`},
				{Code: "RT004", Severity: plan.SeverityInfo, Address: ordersAddr,
					Message: `retired wait queue "orders" in vhost "/" is kept: its message count is unknown; a later apply deletes it once empty`},
			},
			wantAllowed: []plan.Diagnostic{
				{Code: "RT004", Severity: plan.SeverityInfo, Address: waitAddr, Messages: 7,
					Message: `retired wait queue "orders.wait.1.10s" in vhost "/" is draining: 7 messages waiting; a later apply deletes it once empty`},
				{Code: "RT004", Severity: plan.SeverityInfo, Address: ordersAddr,
					Message: `retired wait queue "orders" in vhost "/" is kept: its message count is unknown; a later apply deletes it once empty`},
			},
		},
		{
			name: "RT006 queue replace or delete with consumers attached",
			changes: []plan.Change{
				{Action: plan.Replace, Address: ordersAddr, Details: &plan.Details{Messages: ptr(int64(0)), Consumers: ptr(int64(1))}},
				{Action: plan.Delete, Address: waitAddr, Details: &plan.Details{Messages: ptr(int64(3)), Consumers: ptr(int64(2))}},
				// Zero or unknown consumers, and a draining no-op, are no RT006.
				{Action: plan.Replace, Address: ordersAddr, Details: &plan.Details{Messages: ptr(int64(0)), Consumers: ptr(int64(0))}},
				{Action: plan.Delete, Address: ordersAddr, Details: &plan.Details{Messages: ptr(int64(0))}},
				{Action: plan.NoOp, Address: waitAddr, Details: &plan.Details{Messages: ptr(int64(0)), Consumers: ptr(int64(4)), Why: plan.WhyDraining}},
			},
			want: []plan.Diagnostic{
				{Code: "RT006", Severity: plan.SeverityError, Address: ordersAddr,
					Message: `queue "orders" in vhost "/" has 1 consumer, which may hold unacknowledged deliveries that replacing it destroys; stop them or re-run with --allow-destroy`},
				{Code: "RT002", Severity: plan.SeverityError, Address: waitAddr, Messages: 3,
					Message: `deleting queue "orders.wait.1.10s" in vhost "/" destroys 3 messages; re-run with --allow-destroy to accept`},
				{Code: "RT006", Severity: plan.SeverityError, Address: waitAddr,
					Message: `queue "orders.wait.1.10s" in vhost "/" has 2 consumers, which may hold unacknowledged deliveries that deleting it destroys; stop them or re-run with --allow-destroy`},
				{Code: "RT004", Severity: plan.SeverityInfo, Address: waitAddr,
					Message: `retired wait queue "orders.wait.1.10s" in vhost "/" is draining: 0 messages waiting; a later apply deletes it once empty`},
			},
			wantAllowed: []plan.Diagnostic{
				{Code: "RT006", Severity: plan.SeverityWarning, Address: ordersAddr,
					Message: `queue "orders" in vhost "/" has 1 consumer, which may hold unacknowledged deliveries that replacing it destroys (accepted with --allow-destroy)`},
				{Code: "RT002", Severity: plan.SeverityWarning, Address: waitAddr, Messages: 3,
					Message: `deleting queue "orders.wait.1.10s" in vhost "/" destroys 3 messages (accepted with --allow-destroy)`},
				{Code: "RT006", Severity: plan.SeverityWarning, Address: waitAddr,
					Message: `queue "orders.wait.1.10s" in vhost "/" has 2 consumers, which may hold unacknowledged deliveries that deleting it destroys (accepted with --allow-destroy)`},
				{Code: "RT004", Severity: plan.SeverityInfo, Address: waitAddr,
					Message: `retired wait queue "orders.wait.1.10s" in vhost "/" is draining: 0 messages waiting; a later apply deletes it once empty`},
			},
		},
		{
			name:    "RT005 exchange replace",
			changes: []plan.Change{{Action: plan.Replace, Address: shopAddr}},
			want: []plan.Diagnostic{{Code: "RT005", Severity: plan.SeverityWarning, Address: shopAddr,
				Message: `replacing exchange "shop" in vhost "/": publishers may see unroutable messages between delete and create; its bindings in the spec are re-created in the same apply`}},
			wantAllowed: []plan.Diagnostic{{Code: "RT005", Severity: plan.SeverityWarning, Address: shopAddr,
				Message: `replacing exchange "shop" in vhost "/": publishers may see unroutable messages between delete and create; its bindings in the spec are re-created in the same apply`}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := plan.Plan{Changes: tt.changes}
			if diff := cmp.Diff(tt.want, flagwords.Diagnostics(plan.Check(p, plan.CheckOptions{}))); diff != "" {
				t.Errorf("Check (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantAllowed, flagwords.Diagnostics(plan.Check(p, plan.CheckOptions{AllowDestroy: true}))); diff != "" {
				t.Errorf("Check with AllowDestroy (-want +got):\n%s", diff)
			}
		})
	}
}

// Check reads what Diff plans: one diagnostic per risky change, in plan order.
func TestCheckOnDiff(t *testing.T) {
	desired := with(func(t *topology.Topology) {
		replaceQueue(t, queue("orders", topology.Args{"x-dead-letter-exchange": "orders.dlx", "x-message-ttl": int64(30000)}))
		replaceExchange(t, exchange("shop", "direct", nil))
		dropWait(t)
	})
	p := plan.DiffTopology(small(), desired, plan.Options{Owned: owned(small()), IsWaitQueue: isWaitQueue,
		Messages:  map[topology.Address]int64{orders.Addr(): 42, wait10s.Addr(): 7},
		Consumers: map[topology.Address]int64{orders.Addr(): 2, wait10s.Addr(): 1}})
	var codes []string
	for _, d := range plan.Check(p, plan.CheckOptions{}) {
		codes = append(codes, d.Code+" "+string(d.Severity))
	}
	// The draining wait queue's consumer is no RT006: it is kept. The
	// spec's own policy "ttl" applies to orders, which has no rmqtopo
	// policy: RT024.
	want := []string{"RT005 warning", "RT001 error", "RT006 error", "RT004 info", "RT024 info"}
	if diff := cmp.Diff(want, codes); diff != "" {
		t.Errorf("Check codes (-want +got):\n%s", diff)
	}
}

func TestBlocking(t *testing.T) {
	ds := []plan.Diagnostic{
		{Code: "RT005", Severity: plan.SeverityWarning},
		{Code: "RT001", Severity: plan.SeverityError},
		{Code: "RT004", Severity: plan.SeverityInfo},
		{Code: "RT003", Severity: plan.SeverityError},
	}
	want := []plan.Diagnostic{
		{Code: "RT001", Severity: plan.SeverityError},
		{Code: "RT003", Severity: plan.SeverityError},
	}
	if diff := cmp.Diff(want, plan.Blocking(ds)); diff != "" {
		t.Errorf("Blocking (-want +got):\n%s", diff)
	}
	if got := plan.Blocking(nil); len(got) != 0 {
		t.Errorf("Blocking(nil) = %v, want none", got)
	}
}

func TestSummary(t *testing.T) {
	p := plan.Plan{Changes: []plan.Change{
		{Action: plan.Create}, {Action: plan.Create}, {Action: plan.Update},
		{Action: plan.Replace}, {Action: plan.Delete}, {Action: plan.NoOp},
		{Action: plan.NoOp}, {Action: plan.NoOp},
	}}
	want := plan.ActionCounts{Create: 2, Update: 1, Replace: 1, Delete: 1, NoOp: 3}
	if diff := cmp.Diff(want, p.CountActions()); diff != "" {
		t.Errorf("Summary (-want +got):\n%s", diff)
	}
}
