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

// Feature is one entry of the key table: a policy key, a queue argument
// (with one value, when Value is set), a queue type or a queue property;
// what it takes and belongs to, and what each release does with it.
type Feature struct {
	Kind FeatureKind
	Name string
	// Value narrows the entry to one value of a queue argument or policy
	// key (x-queue-version 1, delayed-retry-type failed); nil for every
	// value.
	Value any
	// Types are the queue types the entry belongs to; nil: every type. A
	// queue type refuses the arguments of the others (since 3.10) and
	// ignores the policy keys of the others.
	Types []string
	// TypesBefore are the queue types the entry belongs to before
	// TypesSince (nil: every type), when that changed.
	TypesBefore []string
	TypesSince  Version
	// ApplyTo are the policy apply-to kinds a policy key acts on: "queues"
	// or "exchanges"; nil: queues only.
	ApplyTo []string
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
	// Permit names the deprecated feature behind the entry
	// (GET /api/deprecated-features). With Until, the refusal from Until is
	// only a default: rabbitmq.conf's deprecated_features.permit.<Permit>
	// = true lets the broker accept it again, and a live broker's phase of
	// the feature decides.
	Permit string
	// DeprecatedSince is the first release with Permit as a deprecated
	// feature; before it the entry is judged by its bounds alone.
	DeprecatedSince Version
	// Plugin is the plugin that registers a policy key: a broker without
	// it enabled refuses the key.
	Plugin string
	// Needs are the keys the broker refuses the entry without, in the same
	// policy (or declaration), while it accepts the entry.
	Needs []Need
	// Values is what values the entry takes.
	Values Values
	// Policy is, for a queue argument, the policy key that sets the same
	// attribute; "" when no policy can.
	Policy string
	// Limit: given both as an argument and by a policy, the lower value
	// takes effect (rabbit_queue_type_util:args_policy_lookup).
	Limit bool
	// Cite is the release note, source file or live probe that shows the
	// bounds.
	Cite string
}

// Need is a key that another key needs beside it, with a value the broker
// takes for it.
type Need struct {
	Key     string
	Example any
}

// ValueKind is the type of value an entry takes.
type ValueKind uint8

// Kinds of values.
const (
	AnyValue ValueKind = iota
	IntValue
	StringValue
	BoolValue
)

// Values says what values an entry takes.
type Values struct {
	Kind ValueKind
	// Min and Max bound an IntValue, inclusive.
	Min, Max int64
	// Enum lists the strings a StringValue may be, if only those.
	Enum []string
	// Pattern is a regular expression a StringValue matches, if any.
	Pattern string
	// Example is a value the broker accepts; the first of Enum, else Min
	// (or 1 when Min is 0), when not set.
	Example any
}

// Sample is a value of the entry the broker accepts.
func (f Feature) Sample() any {
	switch {
	case f.Value != nil:
		return f.Value
	case f.Values.Example != nil:
		return f.Values.Example
	case len(f.Values.Enum) > 0:
		return f.Values.Enum[0]
	case f.Values.Kind == IntValue:
		return max(f.Values.Min, 1)
	case f.Values.Kind == BoolValue:
		return true
	}
	return "x"
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

// AcceptsType reports whether a queue of type typ accepts the argument in
// some release.
func (f Feature) AcceptsType(typ string) bool {
	if f.TypesSince.Known() && (f.TypesBefore == nil || slices.Contains(f.TypesBefore, typ)) {
		return true
	}
	return f.Types == nil || slices.Contains(f.Types, typ)
}

// AcceptsTypeAt reports whether a queue of type typ accepts the argument
// in release v (an unknown release: the latest).
func (f Feature) AcceptsTypeAt(typ string, v Version) bool {
	types := f.TypesAt(v)
	return types == nil || slices.Contains(types, typ)
}

// TypesAt are the queue types that accept the argument in release v (an
// unknown release: the latest); nil: every type.
func (f Feature) TypesAt(v Version) []string {
	if f.TypesSince.Known() && v.Known() && v.Less(f.TypesSince) {
		return f.TypesBefore
	}
	return f.Types
}

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
	citeClassic    = "deps/rabbit/src/rabbit_classic_queue.erl (capabilities/0: queue_arguments)"
	citeMirroring  = "deps/rabbit/src/rabbit_mirror_queue_misc.erl (validate_policy: ha-mode beside the other ha- keys); removed in v4.0.0 (release-notes/4.0.1.md, classic queue mirroring)"
	citeFederation = "deps/rabbitmq_federation/src/rabbit_federation_parameters.erl (a plugin: refused where it is not enabled)"
	citeQuorum     = "deps/rabbit/src/rabbit_quorum_queue.erl (capabilities/0: queue_arguments)"
	citeStream     = "deps/rabbit/src/rabbit_stream_queue.erl (capabilities/0: queue_arguments)"
	citeProbe      = "probed on 3.10.8, 4.0.5 and 4.3.6 (internal/broker's TestKeyTableAgainstBroker)"
)

// Queue types, as the table names them.
var (
	classicOnly       = []string{"classic"}
	quorumOnly        = []string{"quorum"}
	streamOnly        = []string{"stream"}
	classicAndQuorum  = []string{"classic", "quorum"}
	quorumAndStream   = []string{"quorum", "stream"}
	exchangesOnly     = []string{"exchanges"}
	queuesAndExchange = []string{"queues", "exchanges"}
)

// maxTTL is RabbitMQ's cap on a TTL in milliseconds (10 years, since 3.11).
const maxTTL = 315_360_000_000

const maxInt = int64(1<<63 - 1)

// Value rules the entries share.
var (
	anyCount     = Values{Kind: IntValue, Min: 0, Max: maxInt}
	positive     = Values{Kind: IntValue, Min: 1, Max: maxInt}
	ttl          = Values{Kind: IntValue, Min: 0, Max: maxTTL}
	expiry       = Values{Kind: IntValue, Min: 1, Max: maxTTL, Example: int64(3_600_000)} // a probe's queue must outlive its declare
	milliseconds = Values{Kind: IntValue, Min: 0, Max: maxTTL, Example: int64(60000)}
	name         = Values{Kind: StringValue}
	overflow     = Values{Kind: StringValue, Enum: []string{"drop-head", "reject-publish", "reject-publish-dlx"}}
	dlStrategy   = Values{Kind: StringValue, Enum: []string{"at-most-once", "at-least-once"}}
	queueMode    = Values{Kind: StringValue, Enum: []string{"default", "lazy"}}
	masterLoc    = Values{Kind: StringValue, Enum: []string{"client-local", "min-masters", "random"}}
	leaderLoc    = Values{Kind: StringValue, Enum: []string{"client-local", "balanced", "random", "least-leaders"}}
	retryType    = Values{Kind: StringValue, Enum: []string{"disabled", "all", "returned", "failed"}}
	maxAge       = Values{Kind: StringValue, Pattern: `^[0-9]+(Y|M|D|h|m|s)$`, Example: "7D"}
	haPromote    = Values{Kind: StringValue, Enum: []string{"always", "when-synced"}}
	needsHAMode  = []Need{{Key: "ha-mode", Example: "all"}}
)

// VersionTable is every entry, policy keys first, each kind sorted by
// name (and an entry of one value after that of every value). Nothing may
// change it.
var VersionTable = []Feature{
	{Kind: FeaturePolicyKey, Name: "alternate-exchange", ApplyTo: exchangesOnly, Values: name, Cite: citePolicies},
	{Kind: FeaturePolicyKey, Name: "consumer-disconnected-timeout", Types: quorumOnly, Since: rel(4, 3, 0), Before: Refused, Values: milliseconds, Cite: citePolicies + " at v4.3.0; release-notes/4.3.0.md"},
	{Kind: FeaturePolicyKey, Name: "consumer-timeout", Types: classicAndQuorum, Since: rel(3, 12, 0), Before: Refused, Values: milliseconds, Cite: citePolicies + " at v3.12.0"},
	{Kind: FeaturePolicyKey, Name: "dead-letter-exchange", Types: classicAndQuorum, Values: name, Cite: citePolicies},
	{Kind: FeaturePolicyKey, Name: "dead-letter-routing-key", Types: classicAndQuorum, Values: name, Cite: citePolicies},
	{Kind: FeaturePolicyKey, Name: "dead-letter-strategy", Types: quorumOnly, Since: rel(3, 10, 0), Before: Refused, Values: dlStrategy, Cite: citePolicies + " at v3.10.0"},
	// 4.3.0's notes announce the keys, but 4.3.0 registers no validator
	// for them: 4.3.1 does (release-notes/4.3.1.md, #16395).
	{Kind: FeaturePolicyKey, Name: "delayed-retry-max", Types: quorumOnly, Since: rel(4, 3, 1), Before: Refused, Values: milliseconds, Cite: "deps/rabbit/src/rabbit_quorum_queue.erl at v4.3.1; release-notes/4.3.1.md"},
	{Kind: FeaturePolicyKey, Name: "delayed-retry-min", Types: quorumOnly, Since: rel(4, 3, 1), Before: Refused, Values: milliseconds, Cite: "deps/rabbit/src/rabbit_quorum_queue.erl at v4.3.1; release-notes/4.3.1.md"},
	// Every type but disabled needs the least delay.
	{Kind: FeaturePolicyKey, Name: "delayed-retry-type", Types: quorumOnly, Since: rel(4, 3, 1), Before: Refused, Values: retryType,
		Needs: []Need{{Key: "delayed-retry-min", Example: int64(1000)}}, Cite: "4.3.6: \"delayed-retry-min is required when delayed-retry-type is all\" (and returned, failed); " + citeProbe},
	{Kind: FeaturePolicyKey, Name: "delayed-retry-type", Value: "disabled", Types: quorumOnly, Since: rel(4, 3, 1), Before: Refused, Values: retryType, Cite: "deps/rabbit/src/rabbit_quorum_queue.erl at v4.3.1; " + citeProbe},
	{Kind: FeaturePolicyKey, Name: "delivery-limit", Types: quorumOnly, Since: rel(3, 8, 0), Before: Refused, Values: Values{Kind: IntValue, Min: -1, Max: maxInt}, Cite: citePolicies + " at v3.8.0"},
	{Kind: FeaturePolicyKey, Name: "expires", Types: classicAndQuorum, Values: expiry, Cite: citePolicies},
	{Kind: FeaturePolicyKey, Name: "federation-upstream", ApplyTo: queuesAndExchange, Plugin: "rabbitmq_federation", Values: name, Cite: citeFederation},
	{Kind: FeaturePolicyKey, Name: "federation-upstream-pattern", ApplyTo: queuesAndExchange, Plugin: "rabbitmq_federation", Values: name, Cite: citeFederation},
	{Kind: FeaturePolicyKey, Name: "federation-upstream-set", ApplyTo: queuesAndExchange, Plugin: "rabbitmq_federation", Values: Values{Kind: StringValue, Example: "all"}, Cite: citeFederation},
	{Kind: FeaturePolicyKey, Name: "ha-mode", Types: classicOnly, Until: rel(4, 0, 0), Values: Values{Kind: StringValue, Enum: []string{"all", "exactly", "nodes"}}, Cite: citeMirroring},
	{Kind: FeaturePolicyKey, Name: "ha-mode", Value: "exactly", Types: classicOnly, Until: rel(4, 0, 0), Values: Values{Kind: StringValue, Enum: []string{"all", "exactly", "nodes"}},
		Needs: []Need{{Key: "ha-params", Example: int64(2)}}, Cite: citeMirroring},
	{Kind: FeaturePolicyKey, Name: "ha-mode", Value: "nodes", Types: classicOnly, Until: rel(4, 0, 0), Values: Values{Kind: StringValue, Enum: []string{"all", "exactly", "nodes"}},
		Needs: []Need{{Key: "ha-params", Example: []any{"rabbit@nowhere"}}}, Cite: citeMirroring},
	{Kind: FeaturePolicyKey, Name: "ha-params", Types: classicOnly, Until: rel(4, 0, 0), Values: Values{Kind: AnyValue, Example: int64(2)}, Needs: []Need{{Key: "ha-mode", Example: "exactly"}}, Cite: citeMirroring},
	{Kind: FeaturePolicyKey, Name: "ha-promote-on-failure", Types: classicOnly, Until: rel(4, 0, 0), Values: haPromote, Needs: needsHAMode, Cite: citeMirroring},
	{Kind: FeaturePolicyKey, Name: "ha-promote-on-shutdown", Types: classicOnly, Until: rel(4, 0, 0), Values: haPromote, Needs: needsHAMode, Cite: citeMirroring},
	{Kind: FeaturePolicyKey, Name: "ha-sync-batch-size", Types: classicOnly, Until: rel(4, 0, 0), Values: positive, Needs: needsHAMode, Cite: citeMirroring},
	{Kind: FeaturePolicyKey, Name: "ha-sync-mode", Types: classicOnly, Until: rel(4, 0, 0), Values: Values{Kind: StringValue, Enum: []string{"manual", "automatic"}}, Needs: needsHAMode, Cite: citeMirroring},
	{Kind: FeaturePolicyKey, Name: "initial-cluster-size", Types: streamOnly, Since: rel(3, 9, 0), Before: Refused, Values: positive, Cite: citePolicies + " at v3.9.0"},
	{Kind: FeaturePolicyKey, Name: "max-age", Types: streamOnly, Since: rel(3, 9, 0), Before: Refused, Values: maxAge, Cite: citePolicies + " at v3.9.0"},
	// Still validated by 4.3.x; quorum queues stopped reading them in 4.0.
	{Kind: FeaturePolicyKey, Name: "max-in-memory-bytes", Types: quorumOnly, Since: rel(3, 8, 0), Before: Refused, IgnoredSince: rel(4, 0, 0), Values: anyCount, Cite: citePolicies + " (v3.8.0 to v4.3.5); rabbit_quorum_queue.erl at v4.0.0 no longer reads it"},
	{Kind: FeaturePolicyKey, Name: "max-in-memory-length", Types: quorumOnly, Since: rel(3, 8, 0), Before: Refused, IgnoredSince: rel(4, 0, 0), Values: anyCount, Cite: citePolicies + " (v3.8.0 to v4.3.5); rabbit_quorum_queue.erl at v4.0.0 no longer reads it"},
	{Kind: FeaturePolicyKey, Name: "max-length", Types: classicAndQuorum, Values: anyCount, Cite: citePolicies},
	{Kind: FeaturePolicyKey, Name: "max-length-bytes", Values: anyCount, Cite: citePolicies},
	{Kind: FeaturePolicyKey, Name: "message-ttl", Types: classicAndQuorum, Values: ttl, Cite: citePolicies},
	{Kind: FeaturePolicyKey, Name: "overflow", Types: classicAndQuorum, Values: overflow, Cite: citePolicies},
	{Kind: FeaturePolicyKey, Name: "queue-leader-locator", Types: quorumAndStream, Since: rel(3, 9, 0), Before: Refused, Values: leaderLoc, Cite: citePolicies + " at v3.9.0"},
	// Deprecated in 4.0 (registered again by rabbit_classic_queue.erl);
	// denied by default from 4.3.0 (rabbit_queue_location.erl).
	{Kind: FeaturePolicyKey, Name: "queue-master-locator", Types: classicOnly, Until: rel(4, 3, 0), Permit: "queue_master_locator", DeprecatedSince: rel(4, 0, 0), Values: masterLoc,
		Cite: "deps/rabbit/src/rabbit_queue_location.erl: deprecation_phase permitted_by_default to v4.2.9, denied_by_default at v4.3.0; release-notes/4.3.0.md"},
	// Ignored since 3.12 (CQv2), still validated by 4.3.x.
	{Kind: FeaturePolicyKey, Name: "queue-mode", Types: classicOnly, IgnoredSince: rel(3, 12, 0), Values: queueMode, Cite: citePolicies + " at v4.3.0; release-notes/3.12.0.md (lazy mode no longer applies)"},
	{Kind: FeaturePolicyKey, Name: "queue-version", Types: classicOnly, Since: rel(3, 10, 0), Before: Refused, Values: Values{Kind: IntValue, Min: 1, Max: 2}, Cite: citePolicies + " at v3.10.0"},
	{Kind: FeaturePolicyKey, Name: "stream-filter-size-bytes", Types: streamOnly, Since: rel(3, 13, 0), Before: Refused, Values: Values{Kind: IntValue, Min: 16, Max: 255}, Cite: citePolicies + " at v3.13.0"},
	{Kind: FeaturePolicyKey, Name: "stream-max-segment-size-bytes", Types: streamOnly, Since: rel(3, 9, 0), Before: Refused, Values: positive, Cite: citePolicies + " at v3.9.0"},
	{Kind: FeaturePolicyKey, Name: "target-group-size", Types: quorumOnly, Since: rel(3, 13, 0), Before: Refused, Values: positive, Cite: "deps/rabbit/src/rabbit_quorum_queue.erl at v3.13.0 (boot step)"},

	// A queue type refuses the arguments RabbitMQ knows but the type does
	// not take; arguments RabbitMQ does not know are not checked, so a
	// release before an argument's Since ignores it.
	{Kind: FeatureQueueArgument, Name: "x-consumer-disconnected-timeout", Types: quorumOnly, Since: rel(4, 3, 0), Before: Ignored, Values: milliseconds, Policy: "consumer-disconnected-timeout", Cite: citeQuorum + " at v4.3.0"},
	// Not checked by type in 4.0.5; quorum queues only in 4.3.6. 4.1 and
	// 4.2 are not probed: the table takes the cautious side.
	{Kind: FeatureQueueArgument, Name: "x-consumer-timeout", Types: quorumOnly, TypesSince: rel(4, 1, 0), Since: rel(3, 12, 0), Before: Ignored, Values: milliseconds, Policy: "consumer-timeout", Cite: citeDeclare + " at v3.12.0"},
	{Kind: FeatureQueueArgument, Name: "x-dead-letter-exchange", Types: classicAndQuorum, Values: name, Policy: "dead-letter-exchange", Cite: citeDeclare},
	{Kind: FeatureQueueArgument, Name: "x-dead-letter-routing-key", Types: classicAndQuorum, Values: name, Policy: "dead-letter-routing-key",
		Needs: []Need{{Key: "x-dead-letter-exchange", Example: "dlx"}}, Cite: citeDeclare + " (check_dlxrk_arg: routing_key_but_no_dlx_defined)"},
	{Kind: FeatureQueueArgument, Name: "x-dead-letter-strategy", Types: quorumOnly, Since: rel(3, 10, 0), Before: Ignored, Values: dlStrategy, Policy: "dead-letter-strategy", Cite: citeDeclare + " at v3.10.0"},
	{Kind: FeatureQueueArgument, Name: "x-delayed-retry-max", Types: quorumOnly, Since: rel(4, 3, 0), Before: Ignored, Values: milliseconds, Policy: "delayed-retry-max", Cite: citeQuorum + " at v4.3.0; release-notes/4.3.0.md"},
	{Kind: FeatureQueueArgument, Name: "x-delayed-retry-min", Types: quorumOnly, Since: rel(4, 3, 0), Before: Ignored, Values: milliseconds, Policy: "delayed-retry-min", Cite: citeQuorum + " at v4.3.0; release-notes/4.3.0.md"},
	{Kind: FeatureQueueArgument, Name: "x-delayed-retry-type", Types: quorumOnly, Since: rel(4, 3, 0), Before: Ignored, Values: retryType, Policy: "delayed-retry-type", Cite: citeQuorum + " at v4.3.0; release-notes/4.3.0.md"},
	{Kind: FeatureQueueArgument, Name: "x-delivery-limit", Types: quorumOnly, Since: rel(3, 8, 0), Before: Ignored, Values: Values{Kind: IntValue, Min: -1, Max: maxInt}, Policy: "delivery-limit", Limit: true, Cite: citeQuorum},
	{Kind: FeatureQueueArgument, Name: "x-expires", Types: classicAndQuorum, Values: expiry, Policy: "expires", Limit: true, Cite: citeDeclare},
	{Kind: FeatureQueueArgument, Name: "x-initial-cluster-size", Types: streamOnly, Since: rel(3, 9, 0), Before: Ignored, Values: positive, Policy: "initial-cluster-size", Cite: citeStream + "; " + citeProbe},
	{Kind: FeatureQueueArgument, Name: "x-max-age", Types: streamOnly, Since: rel(3, 9, 0), Before: Ignored, Values: maxAge, Policy: "max-age", Cite: citeStream},
	{Kind: FeatureQueueArgument, Name: "x-max-in-memory-bytes", Types: quorumOnly, IgnoredSince: rel(4, 0, 0), Values: anyCount, Policy: "max-in-memory-bytes", Cite: citeQuorum},
	{Kind: FeatureQueueArgument, Name: "x-max-in-memory-length", Types: quorumOnly, IgnoredSince: rel(4, 0, 0), Values: anyCount, Policy: "max-in-memory-length", Cite: citeQuorum},
	{Kind: FeatureQueueArgument, Name: "x-max-length", Types: classicAndQuorum, Values: anyCount, Policy: "max-length", Limit: true, Cite: citeDeclare},
	{Kind: FeatureQueueArgument, Name: "x-max-length-bytes", Values: anyCount, Policy: "max-length-bytes", Limit: true, Cite: citeDeclare},
	{Kind: FeatureQueueArgument, Name: "x-max-priority", Types: classicOnly, Values: Values{Kind: IntValue, Min: 0, Max: 255}, Cite: citeClassic},
	{Kind: FeatureQueueArgument, Name: "x-message-ttl", Types: classicAndQuorum, Values: ttl, Policy: "message-ttl", Limit: true, Cite: citeDeclare},
	{Kind: FeatureQueueArgument, Name: "x-overflow", Types: classicAndQuorum, Values: overflow, Policy: "overflow", Cite: citeDeclare},
	// Denied by default from 4.3.0, like the policy key.
	// Classic queues take it since 4.0, in place of x-queue-master-locator.
	{Kind: FeatureQueueArgument, Name: "x-queue-leader-locator", TypesBefore: quorumAndStream, TypesSince: rel(4, 0, 0), Values: leaderLoc, Policy: "queue-leader-locator",
		Cite: citeQuorum + "; " + citeStream + "; rabbit_classic_queue.erl at v4.0.0; release-notes/4.0.1.md (queue-master-locator deprecated for queue-leader-locator); " + citeProbe},
	{Kind: FeatureQueueArgument, Name: "x-queue-master-locator", Types: classicOnly, Until: rel(4, 3, 0), Permit: "queue_master_locator", DeprecatedSince: rel(4, 0, 0), Values: masterLoc, Policy: "queue-master-locator",
		Cite: "deps/rabbit/src/rabbit_classic_queue.erl (validate_arguments) and rabbit_queue_location.erl at v4.3.0; release-notes/4.3.0.md"},
	// release-notes/4.3.0.md says a declaration with x-queue-mode fails;
	// rabbit_amqqueue.erl at v4.3.0 no longer checks the argument, and a
	// live 4.3.6 accepts it: the broker is right.
	{Kind: FeatureQueueArgument, Name: "x-queue-mode", Types: classicOnly, IgnoredSince: rel(3, 12, 0), Values: queueMode, Policy: "queue-mode",
		Cite: "release-notes/3.12.0.md (lazy mode no longer applies); 4.3.6 accepts it: " + citeProbe},
	{Kind: FeatureQueueArgument, Name: "x-queue-version", Types: classicOnly, Since: rel(3, 10, 0), Before: Ignored, Values: Values{Kind: IntValue, Min: 1, Max: 2}, Policy: "queue-version", Cite: citeDeclare + " at v3.10.0"},
	{Kind: FeatureQueueArgument, Name: "x-queue-version", Value: int64(1), Types: classicOnly, Since: rel(3, 10, 0), Before: Ignored, Until: rel(4, 3, 0), Values: Values{Kind: IntValue, Min: 1, Max: 2}, Policy: "queue-version",
		Cite: citeDeclare + " (check_queue_version accepts only 2 at v4.3.0); release-notes/4.3.0.md"},
	{Kind: FeatureQueueArgument, Name: "x-quorum-initial-group-size", Types: quorumOnly, Values: positive, Cite: citeQuorum},
	// No queue type checks it (4.3.6 takes it on a classic queue and a
	// stream alike); quorum queues act on it.
	{Kind: FeatureQueueArgument, Name: "x-quorum-target-group-size", Since: rel(3, 13, 0), Before: Ignored, Values: positive, Policy: "target-group-size", Cite: citeQuorum + " at v3.13.0; " + citeProbe},
	{Kind: FeatureQueueArgument, Name: "x-single-active-consumer", Types: classicAndQuorum, Values: Values{Kind: BoolValue}, Cite: citeDeclare},
	// Not checked by type in 4.0.5; streams only in 4.3.6 (4.1 and 4.2
	// not probed: the cautious side).
	{Kind: FeatureQueueArgument, Name: "x-stream-filter-size-bytes", Types: streamOnly, TypesSince: rel(4, 1, 0), Since: rel(3, 13, 0), Before: Ignored, Values: Values{Kind: IntValue, Min: 16, Max: 255}, Policy: "stream-filter-size-bytes", Cite: citeStream + " at v3.13.0"},
	{Kind: FeatureQueueArgument, Name: "x-stream-max-segment-size-bytes", Types: streamOnly, Since: rel(3, 9, 0), Before: Ignored, Values: positive, Policy: "stream-max-segment-size-bytes", Cite: citeStream},

	{Kind: FeatureQueueType, Name: "classic", Cite: citeDeclare},
	{Kind: FeatureQueueType, Name: "quorum", Since: rel(3, 8, 0), Before: Refused, Cite: "release-notes/3.8.0.md"},
	{Kind: FeatureQueueType, Name: "stream", Since: rel(3, 9, 0), Before: Refused, Cite: "deps/rabbit/src/rabbit_stream_queue.erl at v3.9.0"},

	// A deprecated feature since 3.13; 4.3.6 still permits it by default
	// (its GET /api/deprecated-features says permitted_by_default), though
	// release-notes/4.3.0.md announced it denied.
	{Kind: FeatureQueueProperty, Name: "transient", Types: classicOnly, Permit: "transient_nonexcl_queues", DeprecatedSince: rel(3, 13, 0),
		Cite: "deps/rabbit/src/rabbit_amqqueue.erl (deprecated feature transient_nonexcl_queues); " + citeProbe},
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
	// QuorumPrioritiesSince: a quorum queue delivers a message of a
	// priority above 4 ahead of its backlog, with no queue argument (4.0:
	// two levels, two high for one normal, rabbit_fifo_q.erl at v4.0.5;
	// 4.3: 32 strict levels, a message without one at 4, rabbit_fifo.erl
	// and rabbit_fifo_pq.erl at v4.3.0; release-notes/4.0.1.md #10637,
	// 4.3.0.md #13885). Every release refuses x-max-priority on a quorum
	// queue; 3.x quorum queues deliver in order whatever the priority.
	// Probed live on 3.10.8, 4.0.5 and 4.3.6 (docs/versions.md).
	QuorumPrioritiesSince = rel(4, 0, 0)
)

// QuorumPriorities reports whether a quorum queue on release v delivers a
// high-priority message ahead of its backlog; false for an unknown
// release, which must be judged the cautious way.
func QuorumPriorities(v Version) bool { return v.Known() && !v.Less(QuorumPrioritiesSince) }

// DefaultDeliveryLimit is the delivery limit a quorum queue gets from
// 4.0 on when neither an argument nor a policy sets one.
const DefaultDeliveryLimit = 20

// DefaultArguments are the arguments release v gives a queue of type typ
// that declares none of them: a queue declared with one of these, of the
// same value, is the same queue on v. None for an unknown release.
func DefaultArguments(v Version, typ string) Args {
	if typ == "quorum" && v.Known() && !v.Less(DefaultDeliveryLimitSince) {
		return Args{"x-delivery-limit": int64(DefaultDeliveryLimit)}
	}
	return nil
}

// LookupFeature returns the table's entry of kind and name; for a value,
// the entry of that value if there is one.
func LookupFeature(kind FeatureKind, name string, value any) (Feature, bool) {
	var found Feature
	ok := false
	for _, f := range VersionTable {
		if f.Kind != kind || f.Name != name {
			continue
		}
		if f.Value == nil && !ok {
			found, ok = f, true
		} else if f.Value != nil && sameValue(f.Value, value) {
			return f, true
		}
	}
	return found, ok
}

// sameValue compares an entry's value with a normalised one.
func sameValue(want, got any) bool {
	switch w := want.(type) {
	case int64:
		n, ok := got.(int64)
		return ok && n == w
	case string:
		s, ok := got.(string)
		return ok && s == w
	}
	return false
}

// PolicyKeyNames are the policy keys of the table, sorted.
func PolicyKeyNames() []string {
	var out []string
	for _, f := range VersionTable {
		if f.Kind == FeaturePolicyKey && f.Value == nil {
			out = append(out, f.Name)
		}
	}
	return out
}

// QueueArgumentNames are the queue arguments of the table, sorted.
func QueueArgumentNames() []string {
	var out []string
	for _, f := range VersionTable {
		if f.Kind == FeatureQueueArgument && f.Value == nil {
			out = append(out, f.Name)
		}
	}
	return out
}
