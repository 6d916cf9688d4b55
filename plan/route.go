package plan

import (
	"strings"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/topology"
)

// CodeRetryRoute (info): how the retries of a work queue the plan
// creates, replaces or migrates, or whose retry route it changes, travel,
// and whether the retry helper honours a handler's RetryAfter there.
const CodeRetryRoute = "RT110"

// CodeOthersLate (info): what a consumer that is not retry.Consume sees
// of the retries of a work queue whose return queue holds them for
// Consume, noted beside RT110.
const CodeOthersLate = "RT111"

// QueueRoute is how one work queue's retries travel (spec.Travel's line):
// Check notes it (RT110) where the plan changes that queue's route.
type QueueRoute struct {
	Address topology.Address
	Travel  string
	// Others, when not empty, is spec.Travel's Others: what a consumer
	// that is not retry.Consume sees (RT111).
	Others string
}

// checkRoutes notes the route of each queue in routes whose retry route
// the plan makes or changes: a plan that leaves them alone stays quiet.
func checkRoutes(p Plan, routes []QueueRoute) []Diagnostic {
	if len(routes) == 0 {
		return nil
	}
	touched := routeChanges(p)
	var ds []Diagnostic
	for _, r := range routes {
		if !touched[r.Address] {
			continue
		}
		ds = append(ds, Diagnostic{Code: CodeRetryRoute, Severity: SeverityInfo, Address: r.Address, Message: r.Address.String() + ": " + r.Travel})
		if r.Others != "" {
			ds = append(ds, Diagnostic{Code: CodeOthersLate, Severity: SeverityInfo, Address: r.Address, Message: r.Address.String() + ": " + r.Others})
		}
	}
	return ds
}

// routeChanges are the queues whose retry route the plan makes or
// changes: the queue itself created, replaced or migrated; its return
// queue created; a binding created from its retry exchange (a layout or
// schedule change) or, on the native layout, its schedule binding (which
// may move it between basic.reject and AMQP 1.0).
func routeChanges(p Plan) map[topology.Address]bool {
	touched := map[topology.Address]bool{}
	queue := func(vhost, name string) {
		touched[topology.Address{Kind: topology.KindQueue, Vhost: vhost, Name: name}] = true
	}
	for _, c := range p.Changes {
		if c.After == nil || c.Action == NoOp || c.Action == Delete {
			continue
		}
		switch {
		case c.After.Queue != nil && c.Action != Update:
			queue(c.Address.Vhost, c.After.Queue.Name)
			if owner, ok := returnQueueOwner(c.After.Queue.Name); ok && c.Action == Create {
				queue(c.Address.Vhost, owner)
			}
		case c.After.Binding != nil && c.Action == Create:
			b := c.After.Binding
			if b.Source == contract.ScheduleExchange {
				queue(c.Address.Vhost, b.Destination)
			} else if owner, ok := retryExchangeOwner(b.Source); ok {
				queue(c.Address.Vhost, owner)
			}
		}
	}
	return touched
}

// returnQueueOwner is the work queue of a return queue's name
// (contract.ReturnQueue); a queue that only looks like one is harmless:
// only the spec's work queues are noted.
func returnQueueOwner(name string) (string, bool) {
	return strings.CutSuffix(name, contract.ReturnQueue(""))
}

// retryExchangeOwner is the work queue of a retry exchange's name
// (contract.RetryExchange).
func retryExchangeOwner(name string) (string, bool) {
	return strings.CutSuffix(name, contract.RetryExchange(""))
}
