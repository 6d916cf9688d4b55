package plan

import "github.com/rmqtopo/rmqtopo/topology"

// Phase is a change's step in the apply order, written once here for Diff
// (which sorts a plan by it) and for apply (which runs one phase at a
// time). Creates go in dependency order, so that a binding's endpoints
// exist before it; deletes go in reverse, after every create, so that a
// schedule change binds the new wait queues before it unbinds the old
// ones: a retry in between may be routed twice (which at-least-once
// consumers tolerate), never zero times (which would send it to the DLQ).
// Policies come first, so that an exchange or queue is born with the
// dead-lettering and limits its policy carries (a policy may name objects
// and exchanges that do not exist yet), and because RabbitMQ re-matches
// every exchange and queue of the vhost against every policy on each policy
// write: written before the objects exist, policies cost next to nothing.
// They are deleted last, so that an object keeps them until it is gone.
type Phase int

const (
	PhaseVhost Phase = iota
	PhasePolicy
	PhaseExchange
	PhaseQueue
	PhaseBinding
	PhaseDeleteBinding
	PhaseDeleteQueue
	PhaseDeleteExchange
	PhaseDeletePolicy
	PhaseDeleteVhost
)

var phaseNames = [...]string{"vhosts", "policies", "exchanges", "queues", "bindings",
	"binding deletes", "queue deletes", "exchange deletes", "policy deletes", "vhost deletes"}

// String names the phase for messages, e.g. "binding deletes".
func (p Phase) String() string {
	if p < 0 || int(p) >= len(phaseNames) {
		return "unknown phase"
	}
	return phaseNames[p]
}

// Concurrent reports whether apply may run the phase's changes at the
// same time. Exchange deletes go one at a time: an exchange deleted takes
// its bindings with it, and RabbitMQ 3.10 crashes the channel (AMQP 541,
// a function_clause in rabbit_exchange:callback) when two exchanges bound
// to each other are deleted at once, as a pruned delay ladder's are.
func (p Phase) Concurrent() bool { return p != PhaseDeleteExchange }

// Phase returns the step of the apply order that c belongs to.
func (c Change) Phase() Phase {
	var p Phase
	switch c.Address.Kind {
	case topology.KindVhost:
		p = PhaseVhost
	case topology.KindExchange:
		p = PhaseExchange
	case topology.KindQueue:
		p = PhaseQueue
	case topology.KindBinding:
		p = PhaseBinding
	default:
		p = PhasePolicy
	}
	if c.Action == Delete {
		p = PhaseDeleteVhost - p
	}
	return p
}

// DestroysQueue reports whether c deletes a queue, alone or to re-create
// it, and so destroys whatever messages the queue holds.
func (c Change) DestroysQueue() bool {
	return c.Address.Kind == topology.KindQueue && (c.Action == Replace || c.Action == Delete)
}

// NeedsCount reports whether the number of messages in c's queue decides
// what c does or whether it is safe: a queue it destroys, or a queue it
// keeps though the spec no longer has it (a retired wait queue until
// drained, a queue of a draining delay ladder, which the plan made with
// the counts may delete instead), or a queue it migrates (whose count is
// the messages it moves).
func (c Change) NeedsCount() bool {
	kept := c.Action == NoOp && c.After == nil
	return c.DestroysQueue() || (c.Address.Kind == topology.KindQueue && (c.Why() == WhyDraining || kept || c.Action == Migrate))
}
