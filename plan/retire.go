package plan

import (
	"fmt"

	"github.com/rmqtopo/rmqtopo/topology"
)

// Retired queues (spec.Retired): hand-made queues a spec adopts only to
// retire them, such as a TTL retry queue dead-lettering back into the
// work queue the spec now gives rmqtopo's retry topology. Such a queue
// holds retries that go back at their time by themselves, so it is kept
// while it may hold anything; with Prune it is deleted once the count says
// it is empty, and apply deletes it only if the broker agrees (if-empty,
// or for a quorum queue the guarded delete, which counts held retries
// and dead-letters too), whatever destruction was allowed. Apply records
// it as the spec's own (intentOf), so that a later plan, with or without
// the retire key, may delete it and no other spec's plan does.

// pruning marks the reason of a retired queue a pruning plan keeps.
const pruning = "pruning"

// retirable reports whether a live queue that is not in the spec is one
// the spec retires and may delete: in the spec's vhosts, not reserved, and
// claimed by no other spec's record.
func (d *differ) retirable(a topology.Address) bool {
	return d.opts.Retire[a] && d.vhosts[a.Vhost] && !topology.Reserved(a.Name) && len(d.opts.Others[a]) == 0
}

// retiredQueue plans retired queue was, at a: deleted when the plan
// prunes and it is known to be empty, else kept and named.
func (d *differ) retiredQueue(a topology.Address, was topology.Queue) {
	before := &Object{Queue: &was}
	n := d.messages(a)
	if d.opts.Prune && n != nil && *n == 0 {
		d.add(Change{Action: Delete, Address: a, Before: before, Details: &Details{Why: WhyRetired,
			Reasons: []Reason{{Kind: ReasonRetiredGone}}, Messages: n, Consumers: d.consumers(a)}})
		return
	}
	r := Reason{Kind: ReasonRetired}
	if d.opts.Prune {
		r.Text = pruning
	}
	if n != nil {
		r.Want, r.Count = "counted", *n
	}
	d.add(Change{Action: NoOp, Address: a, Before: before, Details: &Details{Why: WhyRetired, Reasons: []Reason{r}, Messages: n}})
}

// retiredDiagnostic is RT014, for a retired queue the plan keeps: what
// it holds, that it goes on dead-lettering at its time, and that prune
// deletes it once empty.
func retiredDiagnostic(c Change) Diagnostic {
	rs := c.details().Reasons
	prune := len(rs) == 1 && rs[0].Kind == ReasonRetired && rs[0].Text == pruning
	d := Diagnostic{Code: CodeQueueRetired, Severity: SeverityInfo, Address: c.Address, Remedy: Remedy{PruneOnceEmpty: !prune}}
	held := "its message count is unknown"
	if n := c.Messages(); n != nil {
		d.Messages = *n
		held = "it holds " + countMessages(*n)
	}
	d.Message = fmt.Sprintf("retired: queue %q in vhost %q is a hand-made queue the spec retires (its retry topology takes its place); %s, which go on as the queue sends them (a TTL queue dead-letters them back at their time)",
		c.Address.Name, c.Address.Vhost, held)
	if prune {
		d.Message += "; kept until it is empty, and a pruning apply deletes it then"
	}
	return d
}

// waitForRetired notes, on each migration of a queue Q, the retired queues
// that dead-letter into Q by name through the default exchange
// (x-dead-letter-exchange "" and x-dead-letter-routing-key Q). Apply lets
// them drain first: a message they dead-letter between the migration's
// last count of Q and its delete would be lost with Q, and during the
// short time Q does not exist it would be unroutable. Through an
// exchange they need nothing: the migration hands Q's bindings to the
// temporary queue.
func (d *differ) waitForRetired(live topology.Topology) {
	if len(d.opts.Retire) == 0 {
		return
	}
	into := map[topology.Address][]string{}
	for _, q := range live.Queues {
		dlx, ok := q.Arguments["x-dead-letter-exchange"].(string)
		rk, hasKey := q.Arguments["x-dead-letter-routing-key"].(string)
		if d.opts.Retire[q.Addr()] && ok && dlx == "" && hasKey {
			a := topology.Address{Kind: topology.KindQueue, Vhost: q.Vhost, Name: rk}
			into[a] = append(into[a], q.Name)
		}
	}
	for i := range d.changes {
		if c := &d.changes[i]; c.Action == Migrate && len(into[c.Address]) > 0 {
			c.EditDetails().WaitFor = into[c.Address]
		}
	}
}
