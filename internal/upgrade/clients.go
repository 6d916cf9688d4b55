package upgrade

import (
	"fmt"
	"slices"
	"strings"
)

// bindings: topic binding keys with more than two # wildcards.
func (j *judge) bindings() {
	if !HasAt(TopicHashes, j.target) || HasAt(TopicHashes, j.s.Version) {
		return
	}
	topic := map[string]bool{}
	for _, x := range j.s.Exchanges {
		topic[x.Name] = x.Type == "topic"
	}
	b, _ := behaviour(TopicHashes)
	for _, bd := range j.s.Bindings {
		if !topic[bd.Source] || hashes(bd.RoutingKey) <= 2 {
			continue
		}
		j.add(CodeTopicHashes, "binding", fmt.Sprintf("%s -> %s %s", bd.Source, bd.DestinationType, bd.Destination), "routing_key", bd.RoutingKey,
			fmt.Sprintf("RabbitMQ %s refuses a topic binding key with more than two # wildcards", j.target),
			"rewrite the key with one # as its last segment (a.# matches what a.#.# does)", b.Cite)
	}
}

// channels: global QoS, which 4.3 takes as a prefetch per consumer.
func (j *judge) channels() {
	if !Changes(GlobalQoS, j.s.Version, j.target) {
		return
	}
	b, _ := behaviour(GlobalQoS)
	if !HasAt(GlobalPrefetchShown, j.s.Version) {
		sb, _ := behaviour(GlobalPrefetchShown)
		j.add(CodeGlobalQoSUnseen, "vhost", j.s.Vhost, "global_prefetch_count", nil,
			fmt.Sprintf("RabbitMQ %s does not show global_prefetch_count in GET /api/channels: the preview cannot tell which of the vhost's %d channel(s) use basic.qos global=true, which RabbitMQ %s takes as a prefetch per consumer", j.s.Version, len(j.s.Channels), j.target),
			"check the clients for basic.qos with global=true (a channel-wide prefetch)", sb.Cite+"; "+b.Cite)
	}
	for _, c := range j.s.Channels {
		if c.GlobalPrefetch == 0 {
			continue
		}
		j.add(CodeGlobalQoS, "channel", c.Name, "global_prefetch_count", int64(c.GlobalPrefetch),
			fmt.Sprintf("user %s set basic.qos global=true (prefetch %d for the whole channel); RabbitMQ %s denies global QoS by default and applies %d to each consumer instead: a channel of N consumers may hold N times as many unacknowledged messages", c.User, c.GlobalPrefetch, j.target, c.GlobalPrefetch),
			"set the prefetch per consumer (global=false) in the client, sized for one consumer; or deprecated_features.permit.global_qos = true on every node", b.Cite)
	}
}

// consumerTimeouts: classic queues that had a consumer timeout, by
// policy or argument, or manual-ack consumers that relied on the global
// one.
func (j *judge) consumerTimeouts() {
	if !Changes(ClassicConsumerTimeout, j.s.Version, j.target) {
		return
	}
	b, _ := behaviour(ClassicConsumerTimeout)
	for _, q := range j.s.Queues {
		if q.Type != "classic" {
			continue
		}
		key, value := "", any(nil)
		if v, ok := q.Arguments["x-consumer-timeout"]; ok {
			key, value = "x-consumer-timeout", normalise(v)
		} else if v, ok := q.Effective["consumer-timeout"]; ok {
			key, value = "consumer-timeout", normalise(v)
		} else if slices.ContainsFunc(j.s.Consumers, func(c Consumer) bool { return c.Queue == q.Name && c.AckRequired }) {
			key = "consumer_timeout"
		} else {
			continue
		}
		j.add(CodeConsumerTimeout, "queue", q.Name, key, value,
			fmt.Sprintf("on RabbitMQ %s a classic queue applies no consumer timeout: a consumer that never acks holds its messages until it disconnects", j.target),
			"move the queue to a quorum queue (which evaluates consumer-timeout), or bound the consumer's own processing time", b.Cite)
	}
}

// clientDeath: a vhost that dead-letters loses what clients publish in
// x-death once the target ignores it.
func (j *judge) clientDeath() {
	if !Changes(ClientDeath, j.s.Version, j.target) {
		return
	}
	var dl []string
	for _, q := range j.s.Queues {
		if q.Arguments["x-dead-letter-exchange"] != nil || q.Effective["dead-letter-exchange"] != nil {
			dl = append(dl, q.Name)
		}
	}
	if len(dl) == 0 {
		return
	}
	b, _ := behaviour(ClientDeath)
	j.add(CodeClientDeath, "vhost", j.s.Vhost, "x-death", nil,
		fmt.Sprintf("%d queue(s) dead-letter (%s); on RabbitMQ %s the broker ignores x-death headers that clients publish: a republished message's death count starts over", len(dl), short(dl), j.target),
		"keep attempt counts in a header of the application's own (not x-), as rmqtopo's retry helper does", b.Cite)
}

// deprecated: what the source reports in use, or that it cannot say.
func (j *judge) deprecated() {
	if !j.s.DeprecatedKnown {
		j.add(CodeDeprecatedUnknown, "vhost", j.s.Vhost, "", nil,
			fmt.Sprintf("RabbitMQ %s has no GET /api/deprecated-features/used; the preview judged what it could read", j.s.Version),
			"check the target's log for deprecated-feature warnings after a rehearsal on a copy", "GET /api/deprecated-features/used exists from 3.13.0")
		return
	}
	for _, f := range j.s.Deprecated {
		j.add(CodeDeprecatedInUse, "deprecated-feature", f, "", nil,
			fmt.Sprintf("the broker reports the deprecated feature %s in use (the whole node, not only this vhost)", f),
			"stop using it before RabbitMQ denies it; GET /api/deprecated-features on the target shows its phase", "GET /api/deprecated-features/used")
	}
}

func short(names []string) string {
	if len(names) <= 3 {
		return fmt.Sprint(names)
	}
	return fmt.Sprintf("%v and %d more", names[:3], len(names)-3)
}

// hashes counts the # segments of a topic binding key.
func hashes(key string) int {
	n := 0
	for _, seg := range strings.Split(key, ".") {
		if seg == "#" {
			n++
		}
	}
	return n
}
