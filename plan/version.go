package plan

import (
	"fmt"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Diagnostic codes that depend on the broker's RabbitMQ version; the
// table in docs/plan-apply.md explains each.
const (
	// CodeDefaultDeliveryLimit (warning, 4.0+): a quorum queue without
	// x-delivery-limit gets RabbitMQ's default of 20, where 3.x had none,
	// and dead-letters (or drops) a message after 20 returns.
	CodeDefaultDeliveryLimit = "RT101"
	// CodeClientDeathIgnored (info, 4.0+): the broker ignores x-death
	// headers that clients publish, so a service that counts retries in a
	// republished x-death sees the count start over at every retry.
	CodeClientDeathIgnored = "RT102"
	// CodeRefusedArgument (error, 4.3+): the broker refuses to declare a
	// queue with x-queue-mode, or with x-queue-version 1.
	CodeRefusedArgument = "RT103"
	// CodeTransientQueue (error, 4.3+): the broker refuses to declare a
	// transient (non-durable) queue that is not exclusive.
	CodeTransientQueue = "RT104"
	// CodeQueueModeIgnored (info, 3.12 to 4.2): x-queue-mode has no effect
	// since 3.12, whose classic queues all keep messages on disk.
	CodeQueueModeIgnored = "RT105"
)

// CheckVersion finds what the plan's desired queues mean on a broker of
// version v, in plan order; an unknown version gives nothing. Refusals
// are errors, so that an apply stops before its first write instead of in
// the middle. It is separate from Check, which judges what a plan
// destroys, so that Check's options do not soften these.
func CheckVersion(p Plan, v topology.Version) []Diagnostic {
	if !v.Known() {
		return nil
	}
	var ds []Diagnostic
	deathNoted := map[string]bool{}
	for _, c := range p.Changes {
		if c.After == nil || c.After.Queue == nil {
			continue
		}
		q := *c.After.Queue
		a := c.Address
		declared := c.Action == Create || c.Action == Replace
		if v.AtLeast(4, 3) && declared {
			ds = append(ds, refusedOn43(q, a, v)...)
		}
		if m, ok := q.Arguments["x-queue-mode"]; ok && v.AtLeast(3, 12) && !v.AtLeast(4, 3) {
			ds = append(ds, Diagnostic{Code: CodeQueueModeIgnored, Severity: SeverityInfo, Address: a,
				Message: fmt.Sprintf("%s has x-queue-mode %v, which RabbitMQ %s ignores (since 3.12 every classic queue keeps messages on disk) and 4.3 refuses; drop it", a, m, v)})
		}
		if v.AtLeast(4, 0) && q.QueueType() == "quorum" {
			if _, ok := q.Arguments["x-delivery-limit"]; !ok {
				ds = append(ds, Diagnostic{Code: CodeDefaultDeliveryLimit, Severity: SeverityWarning, Address: a,
					Message: fmt.Sprintf("%s has no x-delivery-limit: RabbitMQ %s applies its default of 20 (3.x applied none), so a message returned 20 times is dead-lettered, or dropped without a dead-letter exchange; set delivery_limit or x-delivery-limit to choose", a, v)})
			}
		}
		if v.AtLeast(4, 0) && contract.IsWaitQueue(q.Name) && !deathNoted[a.Vhost] {
			deathNoted[a.Vhost] = true
			ds = append(ds, Diagnostic{Code: CodeClientDeathIgnored, Severity: SeverityInfo, Address: a,
				Message: fmt.Sprintf("RabbitMQ %s ignores x-death headers published by clients: a service that counts retries in x-death it republishes sees the count start over; rmqtopo's contract counts in %s, and its clients strip x-death (vhost %q)", v, contract.HeaderAttempt, a.Vhost)})
		}
	}
	return ds
}

// refusedOn43 lists what RabbitMQ 4.3 refuses to declare about q.
func refusedOn43(q topology.Queue, a topology.Address, v topology.Version) []Diagnostic {
	var ds []Diagnostic
	refuse := func(code, what string) {
		ds = append(ds, Diagnostic{Code: code, Severity: SeverityError, Address: a,
			Message: fmt.Sprintf("RabbitMQ %s refuses to declare %s: %s; nothing is written until the spec changes", v, a, what)})
	}
	if m, ok := q.Arguments["x-queue-mode"]; ok {
		refuse(CodeRefusedArgument, fmt.Sprintf("it has x-queue-mode %v, which 4.3 removed (every classic queue stores messages on disk); drop the argument", m))
	}
	if n, ok := q.Arguments["x-queue-version"].(int64); ok && n == 1 {
		refuse(CodeRefusedArgument, "it has x-queue-version 1, which 4.3 removed; use 2 or drop the argument")
	}
	if !q.Durable {
		refuse(CodeTransientQueue, "it is transient (durable: false), and 4.3 allows transient queues only when exclusive; make it durable")
	}
	return ds
}
