package contract

// Policy keys of the attributes rmqtopo gives the queues it dead-letters
// from. A queue argument sets the same attribute as "x-" and the key.
const (
	KeyDeadLetterExchange   = "dead-letter-exchange"
	KeyDeadLetterRoutingKey = "dead-letter-routing-key"
	KeyDeadLetterStrategy   = "dead-letter-strategy"
	KeyOverflow             = "overflow"
	KeyDeliveryLimit        = "delivery-limit"
)

// DeadLettering is the one rule of rmqtopo's dead-lettering, as policy
// keys: into exchange, with routingKey unless nil, and, for a quorum
// queue, at least once (AtLeastOnce). Queue arguments and policies are
// both written from it.
func DeadLettering(quorum bool, exchange string, routingKey *string) map[string]any {
	keys := AtLeastOnce(quorum)
	keys[KeyDeadLetterExchange] = exchange
	if routingKey != nil {
		keys[KeyDeadLetterRoutingKey] = *routingKey
	}
	return keys
}

// AtLeastOnce makes a quorum queue's dead-lettering at least once, so that
// a message never vanishes between the source and its target: the
// strategy at-least-once, which needs the overflow reject-publish. Classic
// queues have no such strategy: none.
func AtLeastOnce(quorum bool) map[string]any {
	if !quorum {
		return map[string]any{}
	}
	return map[string]any{KeyDeadLetterStrategy: "at-least-once", KeyOverflow: "reject-publish"}
}

// ArgumentKeys are the policy keys of what a work queue of rmqtopo's own
// contract is declared with as queue arguments: its DeadLettering and the
// default delivery limit, which nothing changes in place. An earlier
// rmqtopo kept them in the queue's policy instead.
var ArgumentKeys = []string{KeyDeadLetterExchange, KeyDeadLetterRoutingKey, KeyDeadLetterStrategy, KeyOverflow, KeyDeliveryLimit}
