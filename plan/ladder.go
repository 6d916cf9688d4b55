package plan

import (
	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/topology"
)

// keepDrainingLadders keeps every object of a retired delay ladder (see
// contract.Ladder) while any of its level queues is kept draining: a
// waiting message still passes down the ladder, through the stage
// exchanges and their bindings, the lower level queues (empty ones too)
// and the delivery exchange, and ends in the ladder's DLQ when its
// destination is gone. Deleting any of them, with Prune or as an empty
// retired wait queue, would strand it. Bindings into the ladder from
// elsewhere (a retry exchange's to its entry) are still removed, so that
// new delays go to the vhost's new ladder only.
func (d *differ) keepDrainingLadders() {
	draining := map[contract.Ladder]bool{}
	for _, c := range d.changes {
		if c.Why() == WhyDraining && c.Address.Kind == topology.KindQueue {
			if l, _, err := contract.ParseLevelQueue(c.Address.Name); err == nil {
				draining[l] = true
			}
		}
	}
	if len(draining) == 0 {
		return
	}
	for i, c := range d.changes {
		if c.Action != Delete {
			continue
		}
		name := c.Address.Name
		if c.Address.Kind == topology.KindBinding {
			name = c.Before.Binding.Source
		}
		if l, ok := contract.ParseLadderObject(name); ok && draining[l] {
			d.changes[i] = Change{Action: NoOp, Address: c.Address, Before: c.Before, Details: &Details{Messages: c.Messages(), Reasons: []Reason{{Kind: ReasonLadderDraining, Subject: l.Name()}}}}
		}
	}
}
