package upgrade

import (
	"strings"

	"github.com/rmqtopo/rmqtopo/rabbitmq"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Behaviour is a change of what RabbitMQ does that the preview judges and
// topology.VersionTable does not hold (it holds keys and arguments): one
// row per feature, with the first release that has the change and the
// source that shows it. A release profile can take these rows over as
// they are.
type Behaviour struct {
	Feature string
	// Since is the first release with the change; Until, when known, the
	// first without it again (none yet).
	Since, Until topology.Version
	Cite         string
}

// Features of the Behaviours table.
const (
	// GlobalQoS: basic.qos with global=true is taken as global=false, a
	// prefetch per consumer (the deprecated feature global_qos, denied by
	// default): accepted, not refused.
	GlobalQoS = "global_qos"
	// GlobalPrefetchShown: GET /api/channels shows global_prefetch_count.
	GlobalPrefetchShown = "global_prefetch_shown"
	// NackNotCounted: a basic.nack (or AMQP 1.0 released) with requeue no
	// longer counts toward a quorum queue's delivery limit; basic.reject
	// still does.
	NackNotCounted = "nack_not_counted"
	// ClassicConsumerTimeout: classic queues no longer evaluate consumer
	// timeouts (policy, argument or the global consumer_timeout).
	ClassicConsumerTimeout = "classic_consumer_timeout_gone"
	// DefaultDeliveryLimit: a quorum queue without a delivery limit gets 20.
	DefaultDeliveryLimit = "default_delivery_limit"
	// ClientDeath: x-death headers a client publishes are ignored.
	ClientDeath = "client_x_death_ignored"
	// TopicHashes: a topic binding key may hold at most two # segments.
	TopicHashes = "topic_binding_key_hashes"
	// Mirroring: classic queue mirroring (ha-* policies) is gone.
	Mirroring = "classic_queue_mirroring"
)

func rel(major, minor int) topology.Version { return topology.Version{Major: major, Minor: minor} }

// Behaviours is the table; the two rows topology already knows read it
// from there.
var Behaviours = []Behaviour{
	// The notes say denied; the source turns the method into
	// global=false rather than closing the channel, and a live 4.3.6
	// answers qos_ok and shows the channel's prefetch_count as the value.
	{Feature: GlobalQoS, Since: rel(4, 3), Cite: "release-notes/4.3.0.md (global_qos: permitted_by_default to denied_by_default); deps/rabbit/src/rabbit_channel.erl at v4.3.0 (handle_method basic.qos global=true: not permitted -> global = false); probed on 4.3.6 by TestPreviewAgainstTarget"},
	{Feature: GlobalPrefetchShown, Until: rel(4, 0), Cite: "deps/rabbit/src/rabbit_channel.erl: STATISTICS_KEYS has global_prefetch_count at v3.13.0, not at v4.0.5; live 4.0.5 and 4.3.6 show no such field"},
	{Feature: NackNotCounted, Since: rel(4, 3), Cite: "release-notes/4.3.0.md (#13885: the delivery limit counts delivery-count, not acquired-count); rabbitmq-server #15387; probed on 4.3.6 by TestPreviewAgainstTarget"},
	{Feature: ClassicConsumerTimeout, Since: rel(4, 3), Cite: "release-notes/4.3.0.md (Consumer Timeouts are No Longer Evaluated for Classic Queues and Streams)"},
	{Feature: DefaultDeliveryLimit, Since: rabbitmq.First(func(p rabbitmq.Profile) bool { return p.DefaultDeliveryLimit() > 0 }), Cite: "rabbit_quorum_queue.erl at v4.0.0 (DEFAULT_DELIVERY_LIMIT); release-notes/4.0.1.md"},
	{Feature: ClientDeath, Since: rabbitmq.First(rabbitmq.Profile.ClientDeathIgnored), Cite: "release-notes/4.0.1.md (AMQP 0.9.1 x-death header)"},
	{Feature: TopicHashes, Since: topology.Version{Major: 4, Minor: 3, Patch: 5}, Cite: "release-notes/4.3.5.md (#17039: at most two # wildcards in a topic binding key); probed on 4.3.6 by TestPreviewAgainstTarget"},
	{Feature: Mirroring, Since: rel(4, 0), Cite: "release-notes/4.0.1.md (classic queue mirroring removed)"},
}

// Changes reports whether moving from source to target crosses the
// start of feature's change: source before it, target on or after it.
func Changes(feature string, source, target topology.Version) bool {
	b, ok := behaviour(feature)
	return ok && Has(b, target) && !Has(b, source)
}

// HasAt reports whether release v has feature's change.
func HasAt(feature string, v topology.Version) bool {
	b, ok := behaviour(feature)
	return ok && Has(b, v)
}

// Has reports whether release v has b's change; an unknown release has
// none.
func Has(b Behaviour, v topology.Version) bool {
	return v.Known() && !v.Less(b.Since) && (!b.Until.Known() || v.Less(b.Until))
}

func behaviour(feature string) (Behaviour, bool) {
	for _, b := range Behaviours {
		if b.Feature == feature {
			return b, true
		}
	}
	return Behaviour{}, false
}

// Hops are RabbitMQ's supported in-place (rolling) upgrades, series to
// series: no minor release may be skipped, except 3.13 to 4.0, 4.1 or
// 4.2; 4.3 only from 4.2. Patch releases may be skipped within a series.
// rabbitmq.com/docs/upgrade (version upgradability) and
// rabbitmq.com/docs/rolling-upgrade; release-notes/4.3.0.md ("supports
// upgrades from 4.2.x").
var Hops = map[string][]string{
	"3.8":  {"3.9"},
	"3.9":  {"3.10"},
	"3.10": {"3.11"},
	"3.11": {"3.12"},
	"3.12": {"3.13"},
	"3.13": {"4.0", "4.1", "4.2"},
	"4.0":  {"4.1"},
	"4.1":  {"4.2"},
	"4.2":  {"4.3"},
}

// NewestPatch is the newest patch release of each series rmqtopo knows
// (the ones its suite runs): a target named by its series alone ("4.3")
// is judged as that patch, the one an upgrade would install.
var NewestPatch = map[string]int{"3.10": 8, "4.0": 5, "4.3": 6}

// Target is the release a --to value names: MAJOR.MINOR.PATCH as given,
// MAJOR.MINOR as the newest patch of the series rmqtopo knows.
func Target(s string) (topology.Version, error) {
	v, err := topology.ParseVersion(s)
	if err != nil {
		return v, err
	}
	if strings.Count(strings.TrimSpace(s), ".") == 1 {
		v.Patch = NewestPatch[series(v)]
	}
	return v, nil
}

// CiteRoute is where the route rules come from.
const CiteRoute = "rabbitmq.com/docs/upgrade and /docs/blue-green-upgrade: rolling upgrades along the hops only; blue-green the only route from 3.12 and older to 4.x, from 3.13 with Khepri, and with mirrored classic queues"
