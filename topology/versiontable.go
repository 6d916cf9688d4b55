package topology

import (
	"fmt"
	"slices"
)

// What each RabbitMQ release accepts: the one version table of rmqtopo.
// Every check that depends on the version (plan's RT009, RT011 and
// RT101–RT105) reads it here, so that a fact about RabbitMQ is written
// once, next to where it comes from. Each entry cites the release note or
// source file of rabbitmq-server (github.com/rabbitmq/rabbitmq-server, at
// the tag named) that shows it; the table test runs every entry at the
// releases around its bounds.
//
// Where the release notes and the source disagree, the table takes the
// cautious side, the one that refuses before the first write rather than
// letting the broker refuse half-way, and the entry says so.

// Support is what a RabbitMQ release does with a policy key, a queue
// argument, a queue type or a queue property.
type Support uint8

const (
	// Accepted: the release accepts it and acts on it.
	Accepted Support = iota
	// Ignored: the release accepts it (or does not check it) and does
	// nothing with it.
	Ignored
	// Refused: the release refuses the write that carries it.
	Refused
)

func (s Support) String() string {
	return [...]string{Accepted: "accepted", Ignored: "ignored", Refused: "refused"}[s]
}

// FeatureKind says what a Feature names.
type FeatureKind string

// Kinds of the version table's entries.
const (
	FeaturePolicyKey     FeatureKind = "policy key"
	FeatureQueueArgument FeatureKind = "queue argument"
	FeatureQueueType     FeatureKind = "queue type"
	// FeatureQueueProperty is a property of a queue declaration rather than an
	// argument: "transient" is a durable: false queue that is not
	// exclusive.
	FeatureQueueProperty FeatureKind = "queue property"
)

// Feature is one entry of the version table: from which release to which
// RabbitMQ accepts a policy key, a queue argument (with one value, when
// Value is set), a queue type or a queue property, and what the releases
// outside that range do with it.
type Feature struct {
	Kind FeatureKind
	Name string
	// Value narrows a queue argument's entry to that value
	// (x-queue-version 1); nil for every value.
	Value any
	// Types are the queue types that accept a queue argument; nil: every
	// type. Since 3.10 a queue type refuses the arguments of the others.
	Types []string
	// Since is the first release that accepts it; the zero Version: every
	// release rmqtopo judges (3.8 on).
	Since Version
	// Before is what the releases before Since do with it.
	Before Support
	// Until is the first release that refuses it again; the zero Version:
	// none yet. The last accepting release is the one before Until.
	Until Version
	// IgnoredSince is the first release that accepts it without acting on
	// it any more; the zero Version: none.
	IgnoredSince Version
	// Permit names the deprecated feature whose refusal (from Until) is
	// only a default: rabbitmq.conf's deprecated_features.permit.<Permit>
	// = true lets the broker accept it again.
	Permit string
	// Cite is the release note or source file that shows the bounds.
	Cite string
}

// At is what release v does with f; an unknown version accepts
// everything, leaving the judgement to the broker.
func (f Feature) At(v Version) Support {
	switch {
	case !v.Known():
		return Accepted
	case f.Since.Known() && v.Less(f.Since):
		return f.Before
	case f.Until.Known() && !v.Less(f.Until):
		return Refused
	case f.IgnoredSince.Known() && !v.Less(f.IgnoredSince):
		return Ignored
	}
	return Accepted
}

// AcceptsType reports whether a queue of type typ accepts the argument.
func (f Feature) AcceptsType(typ string) bool { return f.Types == nil || slices.Contains(f.Types, typ) }

// Span says which releases accept f, for messages: "since RabbitMQ
// 3.13.0", "RabbitMQ 3.8.0 to 4.2.x only".
func (f Feature) Span() string {
	until := ""
	if f.Until.Known() {
		until = f.Until.previous()
	}
	switch {
	case f.Since.Known() && until != "":
		return fmt.Sprintf("RabbitMQ %s to %s only", f.Since, until)
	case f.Since.Known():
		return fmt.Sprintf("since RabbitMQ %s", f.Since)
	case until != "" && f.Permit != "":
		return fmt.Sprintf("denied by default since RabbitMQ %s", f.Until)
	case until != "":
		return fmt.Sprintf("removed in RabbitMQ %s", f.Until)
	}
	return "any version"
}

// PermitHint says how an operator lets the broker accept f again, or ""
// when no setting does.
func (f Feature) PermitHint() string {
	if f.Permit == "" {
		return ""
	}
	return fmt.Sprintf("a default that operators can lift with deprecated_features.permit.%s = true in rabbitmq.conf", f.Permit)
}

// previous names the releases just before v: "4.2.x" before 4.3.0,
// "4.3.0" before 4.3.1.
func (v Version) previous() string {
	if v.Patch > 0 {
		return Version{v.Major, v.Minor, v.Patch - 1}.String()
	}
	if v.Minor > 0 {
		return fmt.Sprintf("%d.%d.x", v.Major, v.Minor-1)
	}
	return fmt.Sprintf("%d.x", v.Major-1)
}

// rel is a Version literal for the table.
func rel(major, minor, patch int) Version {
	return Version{major, minor, patch}
}

// Source files the table cites, at the tag of the release in question.
const (
	citePolicies   = "deps/rabbit/src/rabbit_policies.erl (policy_validator registrations)"
	citeDeclare    = "deps/rabbit/src/rabbit_amqqueue.erl (declare_args, check_arguments_key)"
	citeMirroring  = "deps/rabbit/src/rabbit_mirror_queue_misc.erl; removed in v4.0.0 (release-notes/4.0.1.md, classic queue mirroring)"
	citeFederation = "deps/rabbitmq_federation/src/rabbit_federation_parameters.erl (a plugin: refused where it is not enabled)"
	citeQuorum     = "deps/rabbit/src/rabbit_quorum_queue.erl (capabilities/0: queue_arguments)"
)

// VersionTable is every entry, policy keys first, each kind sorted by
// name. Nothing may change it.
var VersionTable = []Feature{
	{Kind: FeaturePolicyKey, Name: "alternate-exchange", Cite: citePolicies},
	{Kind: FeaturePolicyKey, Name: "consumer-disconnected-timeout", Since: rel(4, 3, 0), Before: Refused, Cite: citePolicies + " at v4.3.0; release-notes/4.3.0.md"},
	{Kind: FeaturePolicyKey, Name: "consumer-timeout", Since: rel(3, 12, 0), Before: Refused, Cite: citePolicies + " at v3.12.0"},
	{Kind: FeaturePolicyKey, Name: "dead-letter-exchange", Cite: citePolicies},
	{Kind: FeaturePolicyKey, Name: "dead-letter-routing-key", Cite: citePolicies},
	{Kind: FeaturePolicyKey, Name: "dead-letter-strategy", Since: rel(3, 10, 0), Before: Refused, Cite: citePolicies + " at v3.10.0"},
	// 4.3.0's notes announce the keys, but 4.3.0 registers no validator
	// for them: 4.3.1 does (release-notes/4.3.1.md, #16395).
	{Kind: FeaturePolicyKey, Name: "delayed-retry-max", Since: rel(4, 3, 1), Before: Refused, Cite: "deps/rabbit/src/rabbit_quorum_queue.erl at v4.3.1; release-notes/4.3.1.md"},
	{Kind: FeaturePolicyKey, Name: "delayed-retry-min", Since: rel(4, 3, 1), Before: Refused, Cite: "deps/rabbit/src/rabbit_quorum_queue.erl at v4.3.1; release-notes/4.3.1.md"},
	{Kind: FeaturePolicyKey, Name: "delayed-retry-type", Since: rel(4, 3, 1), Before: Refused, Cite: "deps/rabbit/src/rabbit_quorum_queue.erl at v4.3.1; release-notes/4.3.1.md"},
	{Kind: FeaturePolicyKey, Name: "delivery-limit", Since: rel(3, 8, 0), Before: Refused, Cite: citePolicies + " at v3.8.0"},
	{Kind: FeaturePolicyKey, Name: "expires", Cite: citePolicies},
	{Kind: FeaturePolicyKey, Name: "federation-upstream", Cite: citeFederation},
	{Kind: FeaturePolicyKey, Name: "federation-upstream-pattern", Cite: citeFederation},
	{Kind: FeaturePolicyKey, Name: "federation-upstream-set", Cite: citeFederation},
	{Kind: FeaturePolicyKey, Name: "ha-mode", Until: rel(4, 0, 0), Cite: citeMirroring},
	{Kind: FeaturePolicyKey, Name: "ha-params", Until: rel(4, 0, 0), Cite: citeMirroring},
	{Kind: FeaturePolicyKey, Name: "ha-promote-on-failure", Until: rel(4, 0, 0), Cite: citeMirroring},
	{Kind: FeaturePolicyKey, Name: "ha-promote-on-shutdown", Until: rel(4, 0, 0), Cite: citeMirroring},
	{Kind: FeaturePolicyKey, Name: "ha-sync-batch-size", Until: rel(4, 0, 0), Cite: citeMirroring},
	{Kind: FeaturePolicyKey, Name: "ha-sync-mode", Until: rel(4, 0, 0), Cite: citeMirroring},
	{Kind: FeaturePolicyKey, Name: "initial-cluster-size", Since: rel(3, 9, 0), Before: Refused, Cite: citePolicies + " at v3.9.0"},
	{Kind: FeaturePolicyKey, Name: "max-age", Since: rel(3, 9, 0), Before: Refused, Cite: citePolicies + " at v3.9.0"},
	// Still validated by 4.3.x; quorum queues stopped reading them in 4.0.
	{Kind: FeaturePolicyKey, Name: "max-in-memory-bytes", Since: rel(3, 8, 0), Before: Refused, IgnoredSince: rel(4, 0, 0), Cite: citePolicies + " (v3.8.0 to v4.3.5); rabbit_quorum_queue.erl at v4.0.0 no longer reads it"},
	{Kind: FeaturePolicyKey, Name: "max-in-memory-length", Since: rel(3, 8, 0), Before: Refused, IgnoredSince: rel(4, 0, 0), Cite: citePolicies + " (v3.8.0 to v4.3.5); rabbit_quorum_queue.erl at v4.0.0 no longer reads it"},
	{Kind: FeaturePolicyKey, Name: "max-length", Cite: citePolicies},
	{Kind: FeaturePolicyKey, Name: "max-length-bytes", Cite: citePolicies},
	{Kind: FeaturePolicyKey, Name: "message-ttl", Cite: citePolicies},
	{Kind: FeaturePolicyKey, Name: "overflow", Cite: citePolicies},
	{Kind: FeaturePolicyKey, Name: "queue-leader-locator", Since: rel(3, 9, 0), Before: Refused, Cite: citePolicies + " at v3.9.0"},
	// Deprecated in 4.0 (registered again by rabbit_classic_queue.erl);
	// denied by default from 4.3.0 (rabbit_queue_location.erl).
	{Kind: FeaturePolicyKey, Name: "queue-master-locator", Until: rel(4, 3, 0), Permit: "queue_master_locator",
		Cite: "deps/rabbit/src/rabbit_queue_location.erl: deprecation_phase permitted_by_default to v4.2.9, denied_by_default at v4.3.0; release-notes/4.3.0.md"},
	// Ignored since 3.12 (CQv2), still validated by 4.3.0.
	{Kind: FeaturePolicyKey, Name: "queue-mode", IgnoredSince: rel(3, 12, 0), Cite: citePolicies + " at v4.3.0; release-notes/3.12.0.md (lazy mode no longer applies)"},
	{Kind: FeaturePolicyKey, Name: "queue-version", Since: rel(3, 10, 0), Before: Refused, Cite: citePolicies + " at v3.10.0"},
	{Kind: FeaturePolicyKey, Name: "stream-filter-size-bytes", Since: rel(3, 13, 0), Before: Refused, Cite: citePolicies + " at v3.13.0"},
	{Kind: FeaturePolicyKey, Name: "stream-max-segment-size-bytes", Since: rel(3, 9, 0), Before: Refused, Cite: citePolicies + " at v3.9.0"},
	{Kind: FeaturePolicyKey, Name: "target-group-size", Since: rel(3, 13, 0), Before: Refused, Cite: "deps/rabbit/src/rabbit_quorum_queue.erl at v3.13.0 (boot step)"},

	// Arguments RabbitMQ does not know are not checked: a release before
	// an argument's Since ignores it.
	{Kind: FeatureQueueArgument, Name: "x-consumer-disconnected-timeout", Types: []string{"quorum"}, Since: rel(4, 3, 0), Before: Ignored, Cite: citeQuorum + " at v4.3.0"},
	{Kind: FeatureQueueArgument, Name: "x-dead-letter-strategy", Types: []string{"quorum"}, Since: rel(3, 10, 0), Before: Ignored, Cite: citeDeclare + " at v3.10.0"},
	{Kind: FeatureQueueArgument, Name: "x-delayed-retry-max", Types: []string{"quorum"}, Since: rel(4, 3, 0), Before: Ignored, Cite: citeQuorum + " at v4.3.0; release-notes/4.3.0.md"},
	{Kind: FeatureQueueArgument, Name: "x-delayed-retry-min", Types: []string{"quorum"}, Since: rel(4, 3, 0), Before: Ignored, Cite: citeQuorum + " at v4.3.0; release-notes/4.3.0.md"},
	{Kind: FeatureQueueArgument, Name: "x-delayed-retry-type", Types: []string{"quorum"}, Since: rel(4, 3, 0), Before: Ignored, Cite: citeQuorum + " at v4.3.0; release-notes/4.3.0.md"},
	{Kind: FeatureQueueArgument, Name: "x-delivery-limit", Types: []string{"quorum"}, Since: rel(3, 8, 0), Before: Ignored, Cite: citeQuorum},
	// Denied by default from 4.3.0, like the policy key.
	{Kind: FeatureQueueArgument, Name: "x-queue-master-locator", Until: rel(4, 3, 0), Permit: "queue_master_locator",
		Cite: "deps/rabbit/src/rabbit_classic_queue.erl (validate_arguments) and rabbit_queue_location.erl at v4.3.0; release-notes/4.3.0.md"},
	// The notes and the source disagree on 4.3.0: release-notes/4.3.0.md
	// says a declaration with x-queue-mode fails, while rabbit_amqqueue.erl
	// at v4.3.0 no longer checks the argument at all. The table takes the
	// notes' side: refusing before the first write is the cautious one.
	{Kind: FeatureQueueArgument, Name: "x-queue-mode", Types: []string{"classic"}, IgnoredSince: rel(3, 12, 0), Until: rel(4, 3, 0),
		Cite: "release-notes/3.12.0.md (lazy mode no longer applies); release-notes/4.3.0.md (CQv1 removed: x-queue-mode fails)"},
	{Kind: FeatureQueueArgument, Name: "x-queue-version", Types: []string{"classic"}, Since: rel(3, 10, 0), Before: Ignored, Cite: citeDeclare + " at v3.10.0"},
	{Kind: FeatureQueueArgument, Name: "x-queue-version", Value: int64(1), Types: []string{"classic"}, Since: rel(3, 10, 0), Before: Ignored, Until: rel(4, 3, 0),
		Cite: citeDeclare + " (check_queue_version accepts only 2 at v4.3.0); release-notes/4.3.0.md"},

	{Kind: FeatureQueueType, Name: "classic", Cite: citeDeclare},
	{Kind: FeatureQueueType, Name: "quorum", Since: rel(3, 8, 0), Before: Refused, Cite: "release-notes/3.8.0.md"},
	{Kind: FeatureQueueType, Name: "stream", Since: rel(3, 9, 0), Before: Refused, Cite: "deps/rabbit/src/rabbit_stream_queue.erl at v3.9.0"},

	{Kind: FeatureQueueProperty, Name: "transient", Until: rel(4, 3, 0), Permit: "transient_nonexcl_queues",
		Cite: "deps/rabbit/src/rabbit_amqqueue.erl: deprecated feature transient_nonexcl_queues denied_by_default at v4.3.0; release-notes/4.3.0.md"},
}

// Behaviours of quorum queues and dead-lettering that change a topology's
// meaning, by the first release that has them.
var (
	// DefaultDeliveryLimitSince: a quorum queue without a delivery limit
	// (argument or policy) gets 20. rabbit_quorum_queue.erl at v4.0.0
	// (DEFAULT_DELIVERY_LIMIT, read from the argument and the policy);
	// release-notes/4.0.1.md.
	DefaultDeliveryLimitSince = rel(4, 0, 0)
	// ClientDeathIgnoredSince: the broker no longer reads x-death headers
	// that clients publish. release-notes/4.0.1.md ("AMQP 0.9.1 x-death
	// header").
	ClientDeathIgnoredSince = rel(4, 0, 0)
)

// LookupFeature returns the table's entry of kind and name; for a queue
// argument with value, the entry of that value if there is one.
func LookupFeature(kind FeatureKind, name string, value any) (Feature, bool) {
	var found Feature
	ok := false
	for _, f := range VersionTable {
		if f.Kind != kind || f.Name != name {
			continue
		}
		if f.Value == nil && !ok {
			found, ok = f, true
		} else if n, isInt := value.(int64); isInt && f.Value == n {
			return f, true
		}
	}
	return found, ok
}

// PolicyKeyNames are the policy keys of the table, sorted.
func PolicyKeyNames() []string {
	var out []string
	for _, f := range VersionTable {
		if f.Kind == FeaturePolicyKey {
			out = append(out, f.Name)
		}
	}
	return out
}
