package spec

import (
	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Where a work queue's attributes live. RabbitMQ matches every queue and
// exchange of a vhost against every policy of the vhost, on each declare
// and on each policy write, compiling each pattern anew: a policy per
// queue makes an apply's broker work grow with the square of the queue
// count (docs/benchmarks.md, "Policies at scale"), and one policy whose
// pattern lists many queues is worse (about 0.9 ms a match for 1,000
// names on 3.10.8; PCRE refuses to compile 3,000). So:
//
//   - what rmqtopo never changes in place is a queue argument: the type,
//     and for its own contract the dead-lettering into Q.dlx (named after
//     the queue), at-least-once with reject-publish for quorum queues, and
//     the default delivery limit (nativeArgs);
//   - what the spec sets and may change (message_ttl, max_length,
//     delivery_limit) is in the queue's own policy, rmqtopo.queue.Q, which
//     only queues that set one of them get (setAttributes): changing such an
//     attribute is an in-place policy update;
//   - a preset's work queue keeps everything beyond what its library
//     declares in its policy, which no declare of the library can conflict
//     with (workQueuePolicy).
//
// A queue an earlier rmqtopo made carries its dead-lettering in its policy
// and lacks the arguments: the plan keeps it as it is, with that policy
// (plan.Diff), rather than replace it.

// Policy keys rmqtopo writes. Classic queues honour all but delivery-limit
// and dead-letter-strategy.
const (
	keyMessageTTL         = "message-ttl"
	keyMaxLength          = "max-length"
	keyDeadLetterExchange = "dead-letter-exchange"
	keyDeadLetterKey      = "dead-letter-routing-key"
	keyDeadLetterStrategy = "dead-letter-strategy"
	keyOverflow           = "overflow"
	keyDeliveryLimit      = "delivery-limit"
	keyAlternateExchange  = "alternate-exchange"
)

// addPolicy adds an rmqtopo-managed policy; an empty definition adds none.
// def is the builder's own, made for this policy: when it is canonical
// already, the policy keeps it rather than a copy.
func (b *builder) addPolicy(name, pattern, applyTo string, def map[string]any) {
	if len(def) == 0 {
		return
	}
	canonical := topology.Args(def)
	if !topology.IsNormal(canonical) {
		canonical = topology.NormalizeArgs(def)
	}
	pol := topology.Policy{Vhost: b.s.Vhost, Name: name, Pattern: pattern, ApplyTo: applyTo,
		Priority: contract.ManagedPolicyPriority, Definition: canonical}
	if i, ok := b.policyAt[name]; ok {
		b.policies[i] = pol // the last word, as in a map
		return
	}
	b.policyAt[name] = len(b.policies)
	b.policies = append(b.policies, pol)
}

// queuePolicy gives one queue its own policy.
func (b *builder) queuePolicy(queue string, def map[string]any) {
	b.addPolicy(contract.QueuePolicy(queue), contract.ExactPattern(queue), "queues", def)
}

// deadLetterPolicy adds to def dead-lettering into exchange (with
// routingKey unless nil), at-least-once where the queue type allows it so
// that a message never vanishes between source and target; at-least-once
// needs overflow reject-publish.
func deadLetterPolicy(def map[string]any, typ, exchange string, routingKey *string) {
	def[keyDeadLetterExchange] = exchange
	if routingKey != nil {
		def[keyDeadLetterKey] = *routingKey
	}
	atLeastOnceFor(def, typ)
}

// atLeastOnce makes a quorum queue's dead-lettering at-least-once.
func atLeastOnceFor(def map[string]any, typ string) {
	if typ == TypeQuorum {
		def[keyDeadLetterStrategy] = "at-least-once"
		def[keyOverflow] = "reject-publish"
	}
}

// workQueuePolicy is the definition of a work queue's policy: its spec's
// TTL, length limit and delivery limit, and, with deadLetter, dead-lettering
// to where deadLetter says.
func workQueuePolicy(q Queue, deadLetter func(def map[string]any)) map[string]any {
	def := map[string]any{}
	if q.Type == TypeQuorum {
		limit := q.DeliveryLimit
		if limit == 0 {
			limit = DefaultDeliveryLimit
		}
		def[keyDeliveryLimit] = limit
	}
	if q.DLQ && deadLetter != nil {
		deadLetter(def)
	}
	if q.MessageTTL > 0 {
		def[keyMessageTTL] = q.MessageTTL.Milliseconds()
	}
	if q.MaxLength > 0 {
		def[keyMaxLength] = q.MaxLength
	}
	return def
}

// nativeArgs adds to args, a work queue's of rmqtopo's own contract, the
// attributes rmqtopo never changes in place: dead-lettering into the
// queue's own dead-letter exchange (only a DLQ toggle would change it, and
// that is a replace), and, unless the spec sets one, the default delivery
// limit of a quorum queue. A spec's delivery_limit goes to the policy
// instead, so that it can change either way; a later one above the default
// on a queue declared with it needs a replace (the lower value wins).
func nativeArgs(args map[string]any, q Queue) {
	if q.DLQ {
		deadLetterTo(args, contract.DeadLetterExchange(q.Name), nil)
	}
	if q.Type == TypeQuorum && q.DeliveryLimit == 0 {
		args["x-delivery-limit"] = DefaultDeliveryLimit
	}
}

// setAttributes is the policy definition of a work queue of rmqtopo's own
// contract: the attributes its spec sets that may change, or none.
func setAttributes(q Queue) map[string]any {
	def := map[string]any{}
	if q.Type == TypeQuorum && q.DeliveryLimit > 0 {
		def[keyDeliveryLimit] = q.DeliveryLimit
	}
	if q.MessageTTL > 0 {
		def[keyMessageTTL] = q.MessageTTL.Milliseconds()
	}
	if q.MaxLength > 0 {
		def[keyMaxLength] = q.MaxLength
	}
	return def
}

// declaredType returns the arguments that declare a queue of type typ:
// none for classic.
func declaredType(typ string) map[string]any {
	if typ != TypeQuorum {
		return map[string]any{}
	}
	return map[string]any{"x-queue-type": TypeQuorum}
}
