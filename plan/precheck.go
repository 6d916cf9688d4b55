package plan

import (
	"fmt"
	"sort"
	"strconv"
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

// policyKey is a policy definition key RabbitMQ accepts, from the version
// that added it until (excluding) the one that removed it; "" is open.
type policyKey struct{ since, until string }

// policyKeys are the keys RabbitMQ's own policy validators accept
// (rabbit_policies and the queue types), plus those of the plugins a
// broker commonly runs (federation); a key of a plugin that is not enabled
// is still refused by the broker.
var policyKeys = map[string]policyKey{
	"alternate-exchange":            {},
	"dead-letter-exchange":          {},
	"dead-letter-routing-key":       {},
	"dead-letter-strategy":          {since: "3.10"},
	"message-ttl":                   {},
	"expires":                       {},
	"max-length":                    {},
	"max-length-bytes":              {},
	"max-in-memory-length":          {since: "3.8", until: "4.0"},
	"max-in-memory-bytes":           {since: "3.8", until: "4.0"},
	"delivery-limit":                {since: "3.8"},
	"overflow":                      {},
	"queue-mode":                    {until: "4.3"},
	"queue-version":                 {since: "3.10"},
	"queue-master-locator":          {until: "4.0"},
	"queue-leader-locator":          {since: "3.10"},
	"max-age":                       {since: "3.9"},
	"stream-max-segment-size-bytes": {since: "3.9"},
	"stream-filter-size-bytes":      {since: "3.12"},
	"initial-cluster-size":          {since: "3.9"},
	"target-group-size":             {since: "3.12"},
	"consumer-timeout":              {since: "3.12"},
	"ha-mode":                       {until: "4.0"},
	"ha-params":                     {until: "4.0"},
	"ha-sync-mode":                  {until: "4.0"},
	"ha-sync-batch-size":            {until: "4.0"},
	"ha-promote-on-shutdown":        {until: "4.0"},
	"ha-promote-on-failure":         {until: "4.0"},
	"federation-upstream":           {},
	"federation-upstream-set":       {},
	"delayed-retry-type":            {since: "4.3"},
	"delayed-retry-min":             {since: "4.3"},
	"delayed-retry-max":             {since: "4.3"},
}

// queueFeatures are queue arguments that need a broker version or a
// queue type; the broker refuses them mid-apply otherwise.
var queueFeatures = []struct {
	arg, since, until string
	types             []string // queue types that accept it; nil: all
}{
	{arg: "x-delivery-limit", types: []string{"quorum"}},
	{arg: "x-dead-letter-strategy", since: "3.10", types: []string{"quorum"}},
	// 4.3's refusal of x-queue-mode is RT103 (CheckVersion), which says
	// what to do about it; one finding per cause.
	{arg: "x-queue-mode", types: []string{"classic"}},
	{arg: "x-delayed-retry-type", since: "4.3", types: []string{"quorum"}},
	{arg: "x-delayed-retry-min", since: "4.3", types: []string{"quorum"}},
	{arg: "x-delayed-retry-max", since: "4.3", types: []string{"quorum"}},
}

var queueTypeSince = map[string]string{"classic": "", "quorum": "3.8", "stream": "3.9"}

// precheck finds, in the plan's creates and updates, what the broker at
// version would refuse only when it is written, and what does not exist
// for a binding: a policy key it does not know, a binding whose source or
// destination is neither in the plan nor on the broker, a queue type or
// argument the version or type lacks. Each refuses the plan before the
// first write. live is the broker's topology; a nil live skips the
// binding check (nothing to check against).
func precheck(p Plan, live *topology.Topology, version string) []Diagnostic {
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
	// Sized once: growing sets of a million names rehashes them several
	// times over.
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
// vhost: a plan's million objects cost a name each in it rather than an
// address, a quarter of the memory.
type objectSet map[objectScope]map[string]bool

type objectScope struct {
	kind  topology.Kind
	vhost string
}

func (s objectSet) has(a topology.Address) bool { return s[objectScope{a.Kind, a.Vhost}][a.Name] }

func checkPolicyKeys(a topology.Address, pol topology.Policy, version string) []Diagnostic {
	var ds []Diagnostic
	for _, k := range sortedArgKeys(pol.Definition) {
		pk, known := policyKeys[k]
		switch {
		case !known:
			msg := fmt.Sprintf("%s: RabbitMQ does not accept the policy key %s", a, quote(k))
			if s := nearest(k); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			}
			ds = append(ds, Diagnostic{Code: CodeUnknownPolicyKey, Severity: SeverityError, Address: a, Message: msg})
		case !versionIn(version, pk.since, pk.until):
			ds = append(ds, Diagnostic{Code: CodeUnknownPolicyKey, Severity: SeverityError, Address: a,
				Message: fmt.Sprintf("%s: RabbitMQ %s does not accept the policy key %q (%s)", a, version, k, span(pk.since, pk.until))})
		}
	}
	return ds
}

func checkQueueFeatures(a topology.Address, q topology.Queue, version string) []Diagnostic {
	var ds []Diagnostic
	typ := q.QueueType()
	if since, ok := queueTypeSince[typ]; ok && !versionIn(version, since, "") {
		ds = append(ds, Diagnostic{Code: CodeUnsupported, Severity: SeverityError, Address: a,
			Message: fmt.Sprintf("%s: RabbitMQ %s has no %s queues (%s)", a, version, typ, span(since, ""))})
	}
	for _, f := range queueFeatures {
		if _, ok := q.Arguments[f.arg]; !ok {
			continue
		}
		if f.types != nil && !contains(f.types, typ) {
			ds = append(ds, Diagnostic{Code: CodeUnsupported, Severity: SeverityError, Address: a,
				Message: fmt.Sprintf("%s: a %s queue does not accept %s (only %s queues do)", a, typ, f.arg, strings.Join(f.types, ", "))})
		} else if !versionIn(version, f.since, f.until) {
			ds = append(ds, Diagnostic{Code: CodeUnsupported, Severity: SeverityError, Address: a,
				Message: fmt.Sprintf("%s: RabbitMQ %s does not accept %s (%s)", a, version, f.arg, span(f.since, f.until))})
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

// versionIn reports whether version is in [since, until); an unknown
// version ("" or unparseable) is in every range: the check is then left
// to the broker.
func versionIn(version, since, until string) bool {
	v, ok := parseVersion(version)
	if !ok {
		return true
	}
	if s, ok := parseVersion(since); ok && less(v, s) {
		return false
	}
	if u, ok := parseVersion(until); ok && !less(v, u) {
		return false
	}
	return true
}

func parseVersion(s string) ([2]int, bool) {
	parts := strings.SplitN(s, ".", 3)
	if len(parts) < 2 {
		return [2]int{}, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(strings.TrimFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	return [2]int{major, minor}, err1 == nil && err2 == nil
}

func less(a, b [2]int) bool { return a[0] < b[0] || (a[0] == b[0] && a[1] < b[1]) }

func span(since, until string) string {
	switch {
	case since != "" && until != "":
		return fmt.Sprintf("RabbitMQ %s to %s only", since, until)
	case since != "":
		return fmt.Sprintf("since RabbitMQ %s", since)
	case until != "":
		return fmt.Sprintf("removed in RabbitMQ %s", until)
	}
	return "any version"
}

// nearest is the known policy key closest to k, if it is close enough to
// be a typo.
func nearest(k string) string {
	best, bestD := "", 4
	for _, cand := range sortedKeyNames() {
		if d := editDistance(k, cand); d < bestD {
			best, bestD = cand, d
		}
	}
	return best
}

func sortedKeyNames() []string {
	out := make([]string, 0, len(policyKeys))
	for k := range policyKeys {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
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

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// quote quotes a name for a message, at most about 100 bytes of it, cut on
// a UTF-8 boundary.
func quote(s string) string { return topology.Quote(s) }
