package plan

import "github.com/rmqtopo/rmqtopo/topology"

// Phase is a change's step in the apply order, written once here for Diff
// (which sorts a plan by it) and for apply (which runs one phase at a
// time). Creates go in dependency order, so that a binding's endpoints
// exist before it; deletes go in reverse, after every create, so that a
// schedule change binds the new wait queues before it unbinds the old
// ones: a retry in between may be routed twice (which at-least-once
// consumers tolerate), never zero times (which would send it to the DLQ).
type Phase int

const (
	PhaseVhost Phase = iota
	PhaseExchange
	PhaseQueue
	PhaseBinding
	PhasePolicy
	PhaseDeletePolicy
	PhaseDeleteBinding
	PhaseDeleteQueue
	PhaseDeleteExchange
	PhaseDeleteVhost
)

var phaseNames = [...]string{"vhosts", "exchanges", "queues", "bindings", "policies",
	"policy deletes", "binding deletes", "queue deletes", "exchange deletes", "vhost deletes"}

// String names the phase for messages, e.g. "binding deletes".
func (p Phase) String() string {
	if p < 0 || int(p) >= len(phaseNames) {
		return "unknown phase"
	}
	return phaseNames[p]
}

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
// what c does or whether it is safe: a queue it destroys, or a retired
// wait queue it keeps until drained, or a queue it migrates (whose count
// is the messages it moves).
func (c Change) NeedsCount() bool {
	return c.DestroysQueue() || (c.Address.Kind == topology.KindQueue && (c.Draining || c.Action == Migrate))
}
