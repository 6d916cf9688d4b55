package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"

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
func precheck(p Plan, live *topology.Topology, version topology.Version) []Diagnostic {
	var ds []Diagnostic
	exists := planned(p, live)
	for _, c := range p.Changes {
		if c.After == nil || (c.Action != Create && c.Action != Update && c.Action != Replace) {
			continue
		}
		switch {
		case c.After.Policy != nil:
			ds = append(ds, checkPolicyKeys(c.Address, *c.After.Policy, version)...)
		case c.After.Queue != nil:
			ds = append(ds, checkQueueFeatures(c.Address, *c.After.Queue, version)...)
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

func checkPolicyKeys(a topology.Address, pol topology.Policy, v topology.Version) []Diagnostic {
	var ds []Diagnostic
	for _, k := range slices.Sorted(maps.Keys(pol.Definition)) {
		f, known := topology.LookupFeature(topology.FeaturePolicyKey, k, nil)
		switch {
		case !known:
			msg := fmt.Sprintf("%s: RabbitMQ does not accept the policy key %s", a, quote(k))
			if s := nearest(k); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			}
			ds = append(ds, Diagnostic{Code: CodeUnknownPolicyKey, Severity: SeverityError, Address: a, Message: msg})
		case f.At(v) == topology.Refused:
			why := f.Span()
			if hint := f.PermitHint(); hint != "" {
				why += "; " + hint
			}
			ds = append(ds, Diagnostic{Code: CodeUnknownPolicyKey, Severity: SeverityError, Address: a,
				Message: fmt.Sprintf("%s: RabbitMQ %s does not accept the policy key %q (%s)", a, v, k, why)})
		}
	}
	return ds
}

// checkQueueFeatures finds a queue type the version lacks, and arguments
// the queue's type refuses or the version does not know yet (a version
// that ignores an argument would not do what the spec says). Arguments a
// later version stopped accepting are checkVersion's (RT103): one finding
// per cause.
func checkQueueFeatures(a topology.Address, q topology.Queue, v topology.Version) []Diagnostic {
	var ds []Diagnostic
	unsupported := func(format string, args ...any) {
		ds = append(ds, Diagnostic{Code: CodeUnsupported, Severity: SeverityError, Address: a,
			Message: fmt.Sprintf("%s: ", a) + fmt.Sprintf(format, args...)})
	}
	typ := q.QueueType()
	if f, ok := topology.LookupFeature(topology.FeatureQueueType, typ, nil); ok && f.At(v) == topology.Refused {
		unsupported("RabbitMQ %s has no %s queues (%s)", v, typ, f.Span())
	}
	for _, arg := range slices.Sorted(maps.Keys(q.Arguments)) {
		f, ok := topology.LookupFeature(topology.FeatureQueueArgument, arg, q.Arguments[arg])
		switch {
		case !ok:
		case !f.AcceptsType(typ):
			unsupported("a %s queue does not accept %s (only %s queues do)", typ, arg, strings.Join(f.Types, ", "))
		case f.Since.Known() && v.Known() && v.Less(f.Since) && f.Before == topology.Refused:
			unsupported("RabbitMQ %s does not accept %s (%s)", v, arg, f.Span())
		case f.Since.Known() && v.Known() && v.Less(f.Since):
			unsupported("RabbitMQ %s ignores %s (%s), so the queue would not do what the spec says", v, arg, f.Span())
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

// nearest is the known policy key closest to k, if it is close enough to
// be a typo.
func nearest(k string) string {
	best, bestD := "", 4
	for _, cand := range topology.PolicyKeyNames() {
		if d := editDistance(k, cand); d < bestD {
			best, bestD = cand, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, with a
// transposition of two neighbours counting as one edit ("lenght").
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

// quote quotes a name for a message, at most about 100 bytes of it, cut on
// a UTF-8 boundary.
func quote(s string) string { return topology.Quote(s) }
