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
	got := map[string]bool{}
	for _, d := range checkRoutes(p, routes) {
		if d.Code != CodeRetryRoute || d.Severity != SeverityInfo || d.Message != d.Address.String()+": retries travel: somewhere" {
			t.Errorf("diagnostic %+v", d)
		}
		got[d.Address.Name] = true
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
