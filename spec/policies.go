package spec

import (
	"maps"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Where a work queue's attributes live. RabbitMQ matches every queue and
// exchange of a vhost against every policy of the vhost, on each declare
// and on each policy write, compiling each pattern anew: a policy per
// queue makes an apply's broker work grow with the square of the queue
// count (docs/benchmarks.md, "Policies at scale"), and one policy whose
// pattern lists many queues is worse (about 0.9 ms a match for 1,000
// names on 3.10.8; PCRE refuses to compile 3,000; RabbitMQ 4.3.6
// refuses any pattern over 1,024 bytes, about 60 short names). So:
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
	keyMessageTTL        = "message-ttl"
	keyMaxLength         = "max-length"
	keyDeliveryLimit     = contract.KeyDeliveryLimit
	keyAlternateExchange = "alternate-exchange"
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

// deadLettering is contract.DeadLettering, the one rule of rmqtopo's
// dead-lettering, for a queue of type typ; as queue arguments (deadLetterTo)
// and as policy keys (deadLetterPolicy) alike.
func deadLettering(typ, exchange string, routingKey *string) map[string]any {
	return contract.DeadLettering(typ == TypeQuorum, exchange, routingKey)
}

// asArguments adds policy keys to args as the queue arguments that set the
// same attributes.
func asArguments(args, keys map[string]any) {
	for k, v := range keys {
		args["x-"+k] = v
	}
}

// deadLetterTo adds dead-lettering to a queue's arguments, for the type
// they declare.
func deadLetterTo(args map[string]any, exchange string, routingKey *string) {
	typ, _ := args["x-queue-type"].(string)
	asArguments(args, deadLettering(typ, exchange, routingKey))
}

// deadLetterPolicy adds dead-lettering to a policy definition.
func deadLetterPolicy(def map[string]any, typ, exchange string, routingKey *string) {
	maps.Copy(def, deadLettering(typ, exchange, routingKey))
}

// atLeastOnceFor makes a quorum queue's dead-lettering at-least-once, in a
// policy definition.
func atLeastOnceFor(def map[string]any, typ string) {
	maps.Copy(def, contract.AtLeastOnce(typ == TypeQuorum))
}

// attributes are what a work queue's spec sets that may change, as policy
// keys: its TTL, length limit and, for a quorum queue, delivery limit;
// withDefault gives a quorum queue rmqtopo's default delivery limit where
// the spec sets none.
func attributes(q Queue, withDefault bool) map[string]any {
	def := map[string]any{}
	switch {
	case q.Type != TypeQuorum:
	case q.DeliveryLimit > 0:
		def[keyDeliveryLimit] = q.DeliveryLimit
	case withDefault:
		def[keyDeliveryLimit] = DefaultDeliveryLimit
	}
	if q.MessageTTL > 0 {
		def[keyMessageTTL] = q.MessageTTL.Milliseconds()
	}
	if q.MaxLength > 0 {
		def[keyMaxLength] = q.MaxLength
	}
	return def
}

// workQueuePolicy is the definition of a preset's work queue policy: its
// attributes with the default delivery limit (no declare of its library
// sets one) and, with a DLQ, dead-lettering to where deadLetter says.
func workQueuePolicy(q Queue, deadLetter func(def map[string]any)) map[string]any {
	def := attributes(q, true)
	if q.DLQ && deadLetter != nil {
		deadLetter(def)
	}
	return def
}

// setAttributes is the policy definition of a work queue of rmqtopo's own
// contract: the attributes its spec sets, or none (see nativeArgs).
func setAttributes(q Queue) map[string]any { return attributes(q, false) }

// nativeArgs adds to args, a work queue's of rmqtopo's own contract, the
// attributes rmqtopo never changes in place: dead-lettering into the
// queue's own dead-letter exchange (turning the DLQ on later keeps it in
// the queue's policy, plan.KeepLegacy), and, unless the spec sets one, the
// default delivery limit of a quorum queue where the release needs it
// written (defaultLimit). A spec's delivery_limit goes to the policy
// instead, so that it can change either way.
func (b *builder) nativeArgs(args map[string]any, q Queue) {
	if q.DLQ {
		asArguments(args, deadLettering(q.Type, contract.DeadLetterExchange(q.Name), nil))
	}
	if q.Type == TypeQuorum && q.DeliveryLimit == 0 {
		b.defaultLimit(args)
	}
}

// declaredType returns the arguments that declare a queue of type typ:
// none for classic.
func declaredType(typ string) map[string]any {
	if typ != TypeQuorum {
		return map[string]any{}
	}
	return map[string]any{"x-queue-type": TypeQuorum}
}
