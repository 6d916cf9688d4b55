package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rmqtopo/rmqtopo/internal/english"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Codes of the checks that refuse, before the first write, what the broker
// would refuse half-way through an apply.
const (
	CodeUnknownPolicyKey = "RT009"
	CodeMissingEndpoint  = "RT010"
	CodeUnsupported      = "RT011"
)

// precheck finds, in the plan's creates and updates, what the broker at
// version would refuse only when it is written, and what does not exist
// for a binding: a policy key it does not know, a binding whose source or
// destination is neither in the plan nor on the broker, a queue type or
// argument the version or type lacks. Each refuses the plan before the
// first write. live is the broker's topology; a nil live skips the
// binding check (nothing to check against).
func precheck(p Plan, live *topology.Topology, x topology.Facts) []Diagnostic {
	var ds []Diagnostic
	exists := planned(p, live)
	for _, c := range p.Changes {
		if c.After == nil || (c.Action != Create && c.Action != Update && c.Action != Replace) {
			continue
		}
		switch {
		case c.After.Policy != nil:
			ds = append(ds, checkPolicyKeys(c.Address, *c.After.Policy, x)...)
		case c.After.Queue != nil:
			ds = append(ds, checkQueueFeatures(c.Address, *c.After.Queue, x)...)
		case c.After.Binding != nil && live != nil:
			ds = append(ds, checkEndpoints(c.Address, *c.After.Binding, exists)...)
		}
	}
	return ds
}

// planned is every exchange and queue that exists once the plan is
// applied: the plan's desired ones and the broker's.
func planned(p Plan, live *topology.Topology) objectSet {
	each := func(f func(topology.Address)) {
		for _, c := range p.Changes {
			if c.After != nil && (c.After.Exchange != nil || c.After.Queue != nil) {
				f(c.Address)
			}
		}
		if live != nil {
			for _, e := range live.Exchanges {
				f(e.Addr())
			}
			for _, q := range live.Queues {
				f(q.Addr())
			}
		}
	}
	// Sized once, so that filling the sets never rehashes them.
	sizes := map[objectScope]int{}
	each(func(a topology.Address) { sizes[objectScope{a.Kind, a.Vhost}]++ })
	out := make(objectSet, len(sizes))
	for scope, n := range sizes {
		out[scope] = make(map[string]bool, n)
	}
	each(func(a topology.Address) { out[objectScope{a.Kind, a.Vhost}][a.Name] = true })
	return out
}

// objectSet is a set of exchange and queue addresses, filed by kind and
// vhost, so that each object costs a name in it rather than an address
// (a quarter of the memory).
type objectSet map[objectScope]map[string]bool

type objectScope struct {
	kind  topology.Kind
	vhost string
}

func (s objectSet) has(a topology.Address) bool { return s[objectScope{a.Kind, a.Vhost}][a.Name] }

// checkPolicyKeys finds the keys of a policy the broker would refuse: one
// it does not know, one the release or its settings refuse (a removed or
// denied feature, a plugin not enabled), one without the keys it needs
// beside it; and says which of its verdicts are defaults (RT108).
func checkPolicyKeys(a topology.Address, pol topology.Policy, x topology.Facts) []Diagnostic {
	var ds []Diagnostic
	refuse := func(format string, args ...any) {
		ds = append(ds, Diagnostic{Code: CodeUnknownPolicyKey, Severity: SeverityError, Address: a,
			Message: fmt.Sprintf("%s: ", a) + fmt.Sprintf(format, args...)})
	}
	for _, k := range slices.Sorted(maps.Keys(pol.Definition)) {
		f, known := topology.LookupFeature(topology.FeaturePolicyKey, k, pol.Definition[k])
		if !known {
			msg := fmt.Sprintf("RabbitMQ does not accept the policy key %s", quote(k))
			if s := nearest(k); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			}
			refuse("%s", msg)
			continue
		}
		v := f.Judge(x)
		if v.Support == topology.Refused {
			refuse("RabbitMQ %s does not accept the policy key %q (%s)", x.Version, k, refusalWhy(f, v))
			continue
		}
		for _, n := range f.Needs {
			if _, set := pol.Definition[n.Key]; !set {
				refuse("RabbitMQ refuses the policy key %q without %q beside it", k, n.Key)
			}
		}
		ds = append(ds, defaultVerdict(a, "the policy key "+quote(k), v)...)
	}
	return ds
}

// refusalWhy says why the table refuses f: what a live fact or setting
// says, else which releases accept it.
func refusalWhy(f topology.Feature, v topology.Verdict) string {
	if v.Why != "" {
		return v.Why
	}
	return f.Span()
}

// defaultVerdict is RT108 for a verdict that is a default an operator can
// change, or that rests on what only a live broker shows.
func defaultVerdict(a topology.Address, what string, v topology.Verdict) []Diagnostic {
	if !v.Default || v.Support == topology.Refused {
		return nil
	}
	return []Diagnostic{{Code: CodeDefaultVerdict, Severity: SeverityWarning, Address: a,
		Message: fmt.Sprintf("%s: the broker accepts %s only by default: %s", a, what, v.Why)}}
}

// checkQueueFeatures finds a queue type the version lacks, and arguments
// the queue's type refuses, the version does not know yet (a version that
// ignores an argument would not do what the spec says), or the broker
// refuses without others beside them. Arguments a later version stopped
// accepting are checkVersion's (RT103): one finding per cause.
func checkQueueFeatures(a topology.Address, q topology.Queue, x topology.Facts) []Diagnostic {
	var ds []Diagnostic
	unsupported := func(format string, args ...any) {
		ds = append(ds, Diagnostic{Code: CodeUnsupported, Severity: SeverityError, Address: a,
			Message: fmt.Sprintf("%s: ", a) + fmt.Sprintf(format, args...)})
	}
	v := x.Version
	typ := q.QueueType()
	if f, ok := topology.LookupFeature(topology.FeatureQueueType, typ, nil); ok && f.At(v) == topology.Refused {
		unsupported("RabbitMQ %s has no %s queues (%s)", v, typ, f.Span())
	}
	for _, arg := range slices.Sorted(maps.Keys(q.Arguments)) {
		f, ok := topology.LookupFeature(topology.FeatureQueueArgument, arg, q.Arguments[arg])
		unknownYet := ok && f.Since.Known() && v.Known() && v.Less(f.Since)
		switch {
		case !ok:
		case unknownYet && f.Before == topology.Refused:
			unsupported("RabbitMQ %s does not accept %s (%s)", v, arg, f.Span())
		case unknownYet:
			unsupported("RabbitMQ %s ignores %s (%s), so the queue would not do what the spec says", v, arg, f.Span())
		case !f.AcceptsTypeAt(typ, v):
			unsupported("a %s queue does not accept %s (only %s queues do)", typ, arg, strings.Join(f.TypesAt(v), ", "))
		default:
			for _, n := range f.Needs {
				if _, set := q.Arguments[n.Key]; !set {
					unsupported("RabbitMQ refuses %s without %s beside it", arg, n.Key)
				}
			}
		}
	}
	return ds
}

func checkEndpoints(a topology.Address, b topology.Binding, exists objectSet) []Diagnostic {
	var ds []Diagnostic
	missing := func(kind topology.Kind, name string) {
		ds = append(ds, Diagnostic{Code: CodeMissingEndpoint, Severity: SeverityError, Address: a,
			Message: fmt.Sprintf("%s: %s %s exists neither in the spec nor on the broker", a, kind, quote(name))})
	}
	src := topology.Address{Kind: topology.KindExchange, Vhost: b.Vhost, Name: b.Source}
	switch {
	case b.Source == "":
		missing(topology.KindExchange, b.Source) // the default exchange takes no bindings
	case topology.Reserved(b.Source) && !topology.BuiltinExchanges[b.Source]:
		ds = append(ds, Diagnostic{Code: CodeMissingEndpoint, Severity: SeverityError, Address: a,
			Message: fmt.Sprintf("%s: %s is not a built-in exchange (amq.direct, amq.fanout, amq.topic, amq.headers, amq.match, amq.rabbitmq.trace), and amq.* names are reserved", a, quote(b.Source))})
	case !topology.Reserved(b.Source) && !exists.has(src):
		missing(topology.KindExchange, b.Source)
	}
	dst := destinationAddr(b)
	if !exists.has(dst) && !(dst.Kind == topology.KindExchange && topology.BuiltinExchanges[b.Destination]) {
		missing(dst.Kind, b.Destination)
	}
	return ds
}

// nearest is the known policy key closest to k, if it is close enough
// (three edits) to be a typo.
func nearest(k string) string {
	return english.Nearest(k, topology.PolicyKeyNames(), 3)
}

// quote quotes a name for a message, at most about 100 bytes of it, cut on
// a UTF-8 boundary.
func quote(s string) string { return topology.Quote(s) }
