package plan

import (
	"testing"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/topology"
)

// TestCheckRoutes: a queue's route is noted (RT110) where the plan
// creates, replaces or migrates it, creates its return queue, or creates
// a binding of its retry exchange or native schedule; a queue the plan
// leaves alone, or only updates, gets no line.
func TestCheckRoutes(t *testing.T) {
	q := func(name string) topology.Address {
		return topology.Address{Kind: topology.KindQueue, Vhost: "/", Name: name}
	}
	queue := func(a Action, name string) Change {
		return Change{Action: a, Address: q(name), After: &Object{Queue: &topology.Queue{Vhost: "/", Name: name}}}
	}
	binding := func(src, dst string) Change {
		b := topology.Binding{Vhost: "/", Source: src, Destination: dst, DestinationType: topology.DestQueue}
		return Change{Action: Create, Address: b.Addr(), After: &Object{Binding: &b}}
	}
	p := Plan{Changes: []Change{
		queue(Create, "new"), queue(Replace, "replaced"), queue(Migrate, "migrated"),
		queue(NoOp, "same"), queue(Update, "updated"),
		queue(Create, contract.ReturnQueue("returns")),
		binding(contract.RetryExchange("relaid"), contract.SharedWaitQueue(2e9)),
		binding(contract.ScheduleExchange, "rescheduled"),
		binding("orders", "bound"), // a business binding changes no route
	}}
	var routes []QueueRoute
	for _, name := range []string{"new", "replaced", "migrated", "same", "updated", "returns", "relaid", "rescheduled", "bound"} {
		routes = append(routes, QueueRoute{Address: q(name), Travel: "retries travel: somewhere"})
	}
	// A queue with a return queue says, beside its route, what another
	// consumer sees (RT111), where its route is noted and only there.
	routes[5].Others, routes[3].Others = "late for others", "late for others"
	got, others := map[string]bool{}, map[string]bool{}
	for _, d := range checkRoutes(p, routes) {
		if d.Code == CodeOthersLate && d.Severity == SeverityInfo && d.Message == d.Address.String()+": late for others" {
			others[d.Address.Name] = true
			continue
		}
		if d.Code != CodeRetryRoute || d.Severity != SeverityInfo || d.Message != d.Address.String()+": retries travel: somewhere" {
			t.Errorf("diagnostic %+v", d)
		}
		got[d.Address.Name] = true
	}
	if !others["returns"] || len(others) != 1 {
		t.Errorf("RT111 for %v; want returns alone (same's route is not noted)", others)
	}
	for _, name := range []string{"new", "replaced", "migrated", "returns", "relaid", "rescheduled"} {
		if !got[name] {
			t.Errorf("no RT110 for %s", name)
		}
	}
	for _, name := range []string{"same", "updated", "bound", contract.ReturnQueue("returns")} {
		if got[name] {
			t.Errorf("RT110 for %s, whose route the plan does not change", name)
		}
	}
}
