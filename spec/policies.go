package spec

import (
	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/topology"
)

// rmqtopo carries what may change about the queues it declares (TTL,
// dead-lettering, limits) in policies of its own rather than in x-
// arguments, which RabbitMQ never lets change: changing such an attribute
// is then an in-place policy update. Arguments keep what is a queue's
// identity (its type, a wait queue's TTL and return route, which its name
// spells) and what a preset's library declares itself, argument for
// argument, so that the library's own declare never fails.

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

// declaredType returns the arguments that declare a queue of type typ:
// none for classic.
func declaredType(typ string) map[string]any {
	if typ != TypeQuorum {
		return map[string]any{}
	}
	return map[string]any{"x-queue-type": TypeQuorum}
}
