package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/rabbitmq"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Diagnostic codes that depend on the RabbitMQ version the plan is judged
// for; the table in docs/plan-apply.md explains each, and
// topology.VersionTable holds the facts behind them.
const (
	// CodeDefaultDeliveryLimit (warning, 4.0+): a quorum queue that
	// delivers to consumers, without a delivery limit (argument or
	// policy), gets RabbitMQ's default of 20, where 3.x had none, and
	// dead-letters (or drops) a message after 20 returns.
	CodeDefaultDeliveryLimit = "RT101"
	// CodeClientDeathIgnored (info, 4.0+): the broker ignores x-death
	// headers that clients publish, so a service that counts retries in a
	// republished x-death sees the count start over at every retry.
	CodeClientDeathIgnored = "RT102"
	// CodeRefusedArgument (error, 4.3+): the broker refuses to declare a
	// queue with x-queue-mode, x-queue-version 1 or (by default)
	// x-queue-master-locator.
	CodeRefusedArgument = "RT103"
	// CodeTransientQueue (error, 4.3+): by default the broker refuses to
	// declare a transient (non-durable) queue that is not exclusive.
	CodeTransientQueue = "RT104"
	// CodeQueueModeIgnored (info, 3.12+): x-queue-mode has no effect
	// since 3.12, whose classic queues all keep messages on disk.
	CodeQueueModeIgnored = "RT105"
	// CodeDefaultVerdict (warning): the broker accepts a key, an argument
	// or a transient queue only by a default an operator can change (a
	// deprecated feature), or only with a plugin that the source cannot
	// show enabled (a plan against an export or a version).
	CodeDefaultVerdict = "RT108"
)

// Where the version a plan is judged for came from (Judged.From).
const (
	// FromOverride: the caller's override (the CLI's --rabbitmq-version).
	FromOverride = "flag"
	// FromBroker: the live broker's /api/overview.
	FromBroker = "broker"
	// FromExport: a definitions export's rabbit_version.
	FromExport = "export"
	// FromNone: no source said; the version is unknown.
	FromNone = "none"
)

// Judged is the RabbitMQ version a plan is judged for, and where that
// version came from: data, which the plan's header (render) words and its
// JSON shows.
type Judged struct {
	// Version is "MAJOR.MINOR.PATCH"; empty when unknown.
	Version string
	// From is where the version came from: FromOverride ("flag"),
	// FromBroker ("broker"), FromExport ("export") or FromNone ("none").
	From string
}

// VersionOverrideError is JudgeVersion's error for an override that is
// not a RabbitMQ version; the caller words it with the name of its
// override (the CLI's flag).
type VersionOverrideError struct {
	// Value is the override as given.
	Value string
	// Err is why it is not a version (topology.ParseVersion's error).
	Err error
}

func (e *VersionOverrideError) Error() string { return "version override: " + e.Err.Error() }
func (e *VersionOverrideError) Unwrap() error { return e.Err }

// JudgeVersion picks the one version every check of a plan made from st
// judges by: override (the CLI's --rabbitmq-version) when given, else the
// version st's source reported, which from names ("broker" or "export").
// An override that is not a version is a *VersionOverrideError.
func JudgeVersion(override string, st *topology.State, from string) (Judged, error) {
	if override != "" {
		v, err := topology.ParseVersion(override)
		if err != nil {
			return Judged{}, &VersionOverrideError{Value: override, Err: err}
		}
		return Judged{Version: v.String(), From: FromOverride}, nil
	}
	if st != nil {
		if v, err := topology.ParseVersion(st.BrokerVersion); err == nil {
			return Judged{Version: v.String(), From: from}, nil
		}
	}
	return Judged{From: FromNone}, nil
}

// judgedVersion is the version Check judges p by: the plan's own, else
// that of the state it was made from; unknown when neither says.
func (p Plan) judgedVersion(st *topology.State) topology.Version {
	s := ""
	switch {
	case p.RabbitMQ != nil:
		s = p.RabbitMQ.Version
	case st != nil:
		s = st.BrokerVersion
	}
	v, _ := topology.ParseVersion(s)
	return v
}

// checkVersion finds what the plan's desired queues mean on a broker of
// version v, in plan order; an unknown version gives nothing. Refusals
// are errors, so that an apply stops before its first write instead of in
// the middle, and no option softens them. st, if any, adds the broker's
// policies to those a queue's delivery limit may come from.
func checkVersion(p Plan, x topology.Facts, st *topology.State) []Diagnostic {
	v := x.Version
	if !v.Known() {
		return nil
	}
	var ds []Diagnostic
	deathNoted := map[string]bool{}
	limits := deliveryLimits{p: p, st: st}
	profile := rabbitmq.ProfileFor(v)
	for _, c := range p.Changes {
		if c.After == nil || c.After.Queue == nil {
			continue
		}
		q := *c.After.Queue
		a := c.Address
		if c.Action == Create || c.Action == Replace {
			ds = append(ds, refused(q, a, x)...)
		}
		if m, ok := q.Arguments["x-queue-mode"]; ok && featureAt(topology.FeatureQueueArgument, "x-queue-mode", m, v) == topology.Ignored {
			ds = append(ds, Diagnostic{Code: CodeQueueModeIgnored, Severity: SeverityInfo, Address: a,
				Message: fmt.Sprintf("%s has x-queue-mode %v, which RabbitMQ %s ignores (since 3.12 every classic queue keeps messages on disk); drop it", a, m, v)})
		}
		if profile.DefaultDeliveryLimit() > 0 && q.QueueType() == "quorum" && deliversToConsumers(q) && !limits.has(q) && !limits.ownDefault(q) {
			ds = append(ds, defaultDeliveryLimit(q, a, v, limits.managed(q)))
		}
		// Said where it matters, once per vhost: where the plan sets up
		// retries (declares a wait queue), whose services may count
		// x-death; not on every plan of a vhost that has them.
		if profile.ClientDeathIgnored() && c.Action != NoOp && contract.IsWaitQueue(q.Name) && !deathNoted[a.Vhost] {
			deathNoted[a.Vhost] = true
			ds = append(ds, Diagnostic{Code: CodeClientDeathIgnored, Severity: SeverityInfo, Address: a,
				Message: fmt.Sprintf("RabbitMQ %s ignores x-death headers published by clients: a service that counts retries in x-death it republishes sees the count start over; rmqtopo's contract counts in %s, and its clients strip x-death (vhost %q)", v, contract.HeaderAttempt, a.Vhost)})
		}
	}
	return ds
}

// defaultDeliveryLimit is RT101 for q, with the advice that clears it:
// delivery_limit for a queue rmqtopo manages; for a raw queue, which
// validation refuses delivery_limit, the argument or a policy.
func defaultDeliveryLimit(q topology.Queue, a topology.Address, v topology.Version, managed bool) Diagnostic {
	advice := "set delivery_limit to choose"
	if !managed {
		advice = "to choose, add x-delivery-limit to its arguments (a raw queue takes no delivery_limit) " +
			"or a policy with delivery-limit, which a live queue takes in place"
	}
	return Diagnostic{Code: CodeDefaultDeliveryLimit, Severity: SeverityWarning, Address: a,
		Message: fmt.Sprintf("%s has no delivery limit (no x-delivery-limit, and no delivery-limit in its policy): RabbitMQ %s applies its default of %d (3.x applied none), so a message returned %[3]d times is dead-lettered, or dropped without a dead-letter exchange; %s",
			a, v, rabbitmq.ProfileFor(v).DefaultDeliveryLimit(), advice)}
}

// deliversToConsumers reports whether q hands messages to consumers: wait
// queues (outbox delay queues among them) and the exhausted queue only
// hold messages until they expire, so a delivery limit means nothing
// there. So does a hand-made wait queue, raw in a spec: one whose
// messages expire (x-message-ttl) into a dead-letter exchange, the shape
// of every TTL retry or delay queue. A work queue of that shape, whose
// messages expire to a DLQ when not consumed in time, is left out too: a
// missed warning there is better than one on every hand-made retry queue.
func deliversToConsumers(q topology.Queue) bool {
	if contract.IsWaitQueue(q.Name) || strings.HasSuffix(q.Name, contract.ExhaustedQueue("")) {
		return false
	}
	_, ttl := q.Arguments["x-message-ttl"]
	_, dlx := q.Arguments["x-dead-letter-exchange"]
	return !ttl || !dlx
}

// deliveryLimits answers whether a queue has a delivery limit of its own,
// as an argument or from the policy RabbitMQ applies to it: the plan's
// desired policies (rmqtopo's policy of a queue carries delivery_limit)
// and the broker's others.
type deliveryLimits struct {
	p     Plan
	st    *topology.State
	index *topology.PolicyIndex
	// exchanges are the exchanges the plan leaves, made when first needed.
	exchanges map[topology.Address]bool
}

func (l *deliveryLimits) has(q topology.Queue) bool {
	if _, ok := q.Arguments["x-delivery-limit"]; ok {
		return true
	}
	if l.index == nil {
		l.index = topology.NewPolicyIndex(l.policies())
	}
	ps := l.index.Matching(q)
	if len(ps) == 0 {
		return false
	}
	_, ok := topology.Effective(q, &ps[0], nil)["delivery-limit"]
	return ok
}

// ownDefault reports whether q is a queue of rmqtopo's own contract that
// takes rmqtopo's default delivery limit, which is 4.0's: a work queue
// with its retry exchange in the plan, or its return queue. rmqtopo
// declares no limit there on 4.0+ (spec.ExpandFor), by design.
func (l *deliveryLimits) ownDefault(q topology.Queue) bool {
	if l.exchanges == nil {
		l.exchanges = map[topology.Address]bool{}
		for _, c := range l.p.Changes {
			if c.Address.Kind == topology.KindExchange && c.After != nil && c.Action != Delete {
				l.exchanges[c.Address] = true
			}
		}
	}
	work := strings.TrimSuffix(q.Name, contract.ReturnQueue(""))
	return l.exchanges[topology.Address{Kind: topology.KindExchange, Vhost: q.Vhost, Name: contract.RetryExchange(work)}]
}

// managed reports whether q is a queue of the spec's that a
// delivery_limit applies to: one with rmqtopo's policy of it (a preset's
// work queue; the others have a retry exchange, see ownDefault). A raw
// queue has none.
func (l *deliveryLimits) managed(q topology.Queue) bool {
	pa := topology.Address{Kind: topology.KindPolicy, Vhost: q.Vhost, Name: contract.QueuePolicy(q.Name)}
	for _, c := range l.p.Changes {
		if c.Address == pa && c.After != nil && c.Action != Delete {
			return true
		}
	}
	return false
}

// policies are the user policies once the plan is applied: the plan's
// desired ones, and the broker's that the plan does not touch.
func (l *deliveryLimits) policies() []topology.Policy {
	var out []topology.Policy
	planned := map[topology.Address]bool{}
	for _, c := range l.p.Changes {
		if c.Address.Kind != topology.KindPolicy {
			continue
		}
		planned[c.Address] = true
		if c.After != nil && c.After.Policy != nil && c.Action != Delete {
			out = append(out, *c.After.Policy)
		}
	}
	if l.st != nil {
		for _, pol := range l.st.Topology.Policies {
			if !planned[pol.Addr()] {
				out = append(out, pol)
			}
		}
	}
	return out
}

// featureAt is what version v does with the table's entry of kind and
// name (and value); Accepted when the table has none.
func featureAt(kind topology.FeatureKind, name string, value any, v topology.Version) topology.Support {
	f, ok := topology.LookupFeature(kind, name, value)
	if !ok {
		return topology.Accepted
	}
	return f.At(v)
}

// refused lists what RabbitMQ with facts x refuses to declare about q:
// the arguments the table says it stopped accepting (RT103) and a
// transient queue (RT104). Refusals that are a default say how operators
// lift them; a transient queue accepted only by default says so (RT108).
func refused(q topology.Queue, a topology.Address, x topology.Facts) []Diagnostic {
	var ds []Diagnostic
	v := x.Version
	refuse := func(code string, verdict topology.Verdict, what string) {
		by := ""
		if verdict.Default {
			by = " by default"
			what += " (" + verdict.Why + ")"
		}
		ds = append(ds, Diagnostic{Code: code, Severity: SeverityError, Address: a,
			Message: fmt.Sprintf("RabbitMQ %s refuses%s to declare %s: %s; nothing is written until the spec changes", v, by, a, what)})
	}
	for _, arg := range slices.Sorted(maps.Keys(q.Arguments)) {
		val := q.Arguments[arg]
		f, ok := topology.LookupFeature(topology.FeatureQueueArgument, arg, val)
		if !ok || !f.Until.Known() && f.Permit == "" {
			continue
		}
		verdict := f.Judge(x)
		if verdict.Support != topology.Refused {
			ds = append(ds, defaultVerdict(a, arg, verdict)...)
			continue
		}
		switch arg {
		case "x-queue-version":
			refuse(CodeRefusedArgument, verdict, fmt.Sprintf("it has x-queue-version %v, which %s removed; use 2 or drop the argument", val, f.Until))
		case "x-queue-master-locator":
			refuse(CodeRefusedArgument, verdict, "it has x-queue-master-locator, deprecated since 4.0; use x-queue-leader-locator")
		default:
			refuse(CodeRefusedArgument, verdict, fmt.Sprintf("it has %s, which RabbitMQ %s refuses; drop the argument", arg, v))
		}
	}
	if !q.Durable { // rmqtopo declares no exclusive queues
		if f, ok := topology.LookupFeature(topology.FeatureQueueProperty, "transient", nil); ok {
			verdict := f.JudgeOn(q.QueueType(), x)
			if verdict.Support == topology.Refused {
				refuse(CodeTransientQueue, verdict, "it is transient (durable: false) and not exclusive; make it durable")
			} else {
				ds = append(ds, defaultVerdict(a, "a transient non-exclusive queue", verdict)...)
			}
		}
	}
	return ds
}
