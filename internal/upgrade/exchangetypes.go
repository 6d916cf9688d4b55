package upgrade

import (
	"slices"

	"github.com/rmqtopo/rmqtopo/topology"
)

// ExchangeType is one exchange type and where a release gets it: built
// into the broker, from a plugin its packages ship (disabled until
// enabled), or from a plugin no release ships.
type ExchangeType struct {
	Type string
	// Plugin provides the type; "" for a type built in.
	Plugin string
	// Since is the first release that has the type built in or ships its
	// plugin; Until, when known, the first that no longer does. Shipped
	// false: no RabbitMQ package ships the plugin (it is installed apart).
	Since, Until topology.Version
	Shipped      bool
	// Alternative is what to use on a target without the type.
	Alternative string
	// ApartUntil: the plugin's own releases, installed apart from
	// RabbitMQ's packages, have a build for each series before this one.
	ApartUntil topology.Version
	Cite       string
}

// citeShipped is how the shipped plugins were seen: the plugins
// directory of each release rmqtopo tests, and the types a node reports
// once they are enabled.
const citeShipped = "plugins/ of rabbitmq_server-3.10.8, -4.0.5 and -4.3.6 (rabbitmq-plugins list); GET /api/overview exchange_types with the plugin enabled, live in TestPreviewAgainstTarget"

// ExchangeTypes is the table; a type not in it comes from a plugin no
// release ships, as x-delayed-message.
var ExchangeTypes = []ExchangeType{
	{Type: "direct", Shipped: true, Cite: "AMQP 0-9-1"},
	{Type: "fanout", Shipped: true, Cite: "AMQP 0-9-1"},
	{Type: "topic", Shipped: true, Cite: "AMQP 0-9-1"},
	{Type: "headers", Shipped: true, Cite: "AMQP 0-9-1"},
	{Type: "x-local-random", Since: rel(4, 0), Shipped: true,
		Cite: "rabbitmq.com/docs/local-random-exchange (new in 4.0); GET /api/overview exchange_types lists it on 4.0.5 and 4.3.6, not on 3.10.8"},
	{Type: "x-consistent-hash", Plugin: "rabbitmq_consistent_hash_exchange", Since: rel(3, 10), Shipped: true, Cite: citeShipped},
	{Type: "x-random", Plugin: "rabbitmq_random_exchange", Since: rel(3, 10), Shipped: true, Cite: citeShipped},
	{Type: "x-recent-history", Plugin: "rabbitmq_recent_history_exchange", Since: rel(3, 10), Shipped: true, Cite: citeShipped},
	{Type: "x-jms-topic", Plugin: "rabbitmq_jms_topic_exchange", Since: rel(3, 10), Shipped: true, Cite: citeShipped},
	// 4.3.6 has the type in rabbit itself (rabbit_exchange_type_modulus_hash
	// in rabbit-4.3.6/ebin, listed by a node with no plugin enabled); 4.0.5
	// only in rabbitmq_sharding. 4.1 and 4.2 were not checked: there the
	// plugin row asks to enable rabbitmq_sharding, which ships still.
	{Type: "x-modulus-hash", Plugin: "rabbitmq_sharding", Since: rel(3, 10), Until: rel(4, 3), Shipped: true, Cite: citeShipped},
	{Type: "x-modulus-hash", Since: rel(4, 3), Shipped: true,
		Cite: "rabbitmq.com/docs/modulus-hash-exchange (a built-in exchange type, docs of 4.3); GET /api/overview exchange_types of 4.3.6 with no plugin enabled"},
	{Type: "x-delayed-message", Plugin: "rabbitmq_delayed_message_exchange",
		Alternative: "rmqtopo's retry layouts: a queue's retry delays on any release (`levels` with retry.Delayer for a delay per message, or `shared`), and on 4.3.1+ `native`, where the quorum queue holds the retry (x-delayed-retry-*; docs/spec.md#layouts)",
		ApartUntil:  rel(4, 3),
		Cite:        "never in RabbitMQ's packages (a plugins/ listing of 3.10.8, 4.0.5, 4.3.6); github.com/rabbitmq/rabbitmq-delayed-message-exchange: builds for 4.0, 4.1 and 4.2 (issues #290, #310, #318), archived January 2026 with no 4.3 build"},
}

// skippedTypes are exchanges a plugin makes for itself and remakes on
// the target from its own configuration: federation's upstream exchanges.
var skippedTypes = []string{"x-federation-upstream"}

// lookupType returns the table's row of typ at release v (a type that
// moved into the broker has a row for each), else its first row; a type
// not in the table comes from a plugin no release ships.
func lookupType(typ string, v topology.Version) ExchangeType {
	var rows []ExchangeType
	for _, x := range ExchangeTypes {
		if x.Type == typ {
			rows = append(rows, x)
		}
	}
	if len(rows) == 0 {
		return ExchangeType{Type: typ, Cite: "not built into RabbitMQ nor in a plugin its packages ship (" + citeShipped + ")"}
	}
	for _, x := range rows {
		if builtIn, shipped := typeAt(x, v); builtIn || shipped {
			return x
		}
	}
	return rows[0]
}

// typeAt says what a target has of typ: builtIn (nothing to do), shipped
// (its plugin is in the packages, to enable), or neither.
func typeAt(x ExchangeType, v topology.Version) (builtIn, shipped bool) {
	in := x.Shipped && !v.Less(x.Since) && (!x.Until.Known() || v.Less(x.Until))
	return in && x.Plugin == "", in && x.Plugin != ""
}

// TypeAt says what release v has of the exchange type typ by the table:
// built in, or from a plugin its packages ship.
func TypeAt(typ string, v topology.Version) (builtIn, shipped bool) {
	return typeAt(lookupType(typ, v), v)
}

// lack is what the target lacks of an exchange type.
type lack int

const (
	// has: built in, or enabled on the target broker read.
	has lack = iota
	// toEnable: its plugin ships with the target but is not enabled
	// (a release as installed enables none).
	toEnable
	// missing: no package of the target ships it.
	missing
)

// lacks judges typ on the target: the target broker's own list when it
// was read, else the table.
func (j *judge) lacks(typ string) (lack, ExchangeType) {
	x := lookupType(typ, j.target)
	if j.green.ExchangeTypes != nil && slices.Contains(j.green.ExchangeTypes, typ) {
		return has, x
	}
	builtIn, shipped := typeAt(x, j.target)
	switch {
	case builtIn:
		return has, x
	case shipped:
		return toEnable, x
	}
	return missing, x
}
