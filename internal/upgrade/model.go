package upgrade

import "github.com/rmqtopo/rmqtopo/topology"

// Snapshot is what the preview reads of one vhost of a live broker:
// everything declared there, by rmqtopo's specs, applications and people.
type Snapshot struct {
	Version topology.Version
	Vhost   string
	// Khepri: the khepri_db feature flag is enabled (3.13 only matters).
	Khepri    bool
	Queues    []Queue
	Policies  []Policy
	Exchanges []Exchange
	Bindings  []Binding
	// Deprecated are the deprecated features in use
	// (GET /api/deprecated-features/used); DeprecatedKnown is false where
	// the broker has no such endpoint (before 3.13).
	Deprecated      []string
	DeprecatedKnown bool
	Channels        []Channel
	Consumers       []Consumer
	// ExchangeTypes are the exchange types the node has enabled, built in
	// and from plugins (GET /api/overview exchange_types): the whole
	// node, not only this vhost.
	ExchangeTypes []string
}

// Queue is one queue as GET /api/queues/{vhost} shows it.
type Queue struct {
	Name       string
	Type       string
	Durable    bool
	Exclusive  bool
	AutoDelete bool
	Arguments  map[string]any
	// Effective is effective_policy_definition: the keys of the user and
	// operator policies that apply to it.
	Effective map[string]any
	// Policy is the name of the user policy that applies, if any.
	Policy string
}

// Policy is a user or operator policy of the vhost.
type Policy struct {
	Name       string
	Pattern    string
	ApplyTo    string
	Priority   int
	Definition map[string]any
	Operator   bool
}

// Exchange is one exchange of the vhost.
type Exchange struct {
	Name      string
	Type      string
	Arguments map[string]any
}

// Binding is one binding of the vhost whose source is an exchange;
// DestinationType is "queue" or "exchange".
type Binding struct {
	Source, Destination, DestinationType, RoutingKey string
}

// Green is what the preview knows of the target: its release, and, when
// a live target broker was given (--target-url), the exchange types it
// has enabled. Without one, the target is judged as its release installs:
// no plugin enabled.
type Green struct {
	Version topology.Version
	// ExchangeTypes is GET /api/overview exchange_types of the target;
	// nil when no target broker was read.
	ExchangeTypes []string
}

// Channel is one channel of the vhost (GET /api/channels).
type Channel struct {
	Name string
	User string
	// GlobalPrefetch is global_prefetch_count: a basic.qos with global=true.
	GlobalPrefetch int
}

// Consumer is one consumer of the vhost (GET /api/consumers/{vhost}).
type Consumer struct {
	Queue   string
	Tag     string
	Channel string
	// AckRequired: the consumer acknowledges manually.
	AckRequired bool
	Arguments   map[string]any
}
