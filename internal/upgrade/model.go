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
	Name string
	Type string
}

// Binding is one binding of the vhost whose source is an exchange.
type Binding struct {
	Source, Destination, DestinationType, RoutingKey string
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
