package topology

import (
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// What RabbitMQ makes of a queue's arguments and the policies that match
// it. At most one user policy applies to a queue: the matching one of
// highest priority. A key given both as an argument and by that policy
// takes the lower value for numeric limits and the argument's value for
// everything else; an operator policy caps numeric limits the same way.

// limitKeys and argPolicyKeys are the key table's Limit and Policy of each
// queue argument, by policy key and by argument: read on every object of
// a plan, so indexed once.
var limitKeys, argPolicyKeys = func() (map[string]bool, map[string]string) {
	limits, keys := map[string]bool{}, map[string]string{}
	for _, f := range VersionTable {
		if f.Kind != FeatureQueueArgument || f.Value != nil {
			continue
		}
		keys[f.Name] = f.Policy
		if f.Limit {
			limits[f.Policy] = true
		}
	}
	return limits, keys
}()

// IsLimitKey reports whether the effective value of a policy key is the
// lower of the values given (message-ttl, max-length, ...): the key
// table's Limit.
func IsLimitKey(key string) bool { return limitKeys[key] }

// PolicyKey returns the policy key that sets the same attribute as the
// queue argument arg, and whether a policy can set it at all (the key
// table's Policy).
func PolicyKey(arg string) (string, bool) {
	k := argPolicyKeys[arg]
	return k, k != ""
}

// Applies reports whether p applies to queue q by vhost, apply-to and
// pattern. Patterns are RabbitMQ's (Erlang PCRE) and read here as Go
// regular expressions, which agree on everything but exotic syntax; one
// that does not compile matches nothing.
func (p Policy) Applies(q Queue) bool {
	return p.concernsQueue(q) && p.matchesName(q.Name)
}

// concernsQueue is Applies but for the pattern.
func (p Policy) concernsQueue(q Queue) bool {
	if p.Vhost != q.Vhost {
		return false
	}
	switch p.ApplyTo {
	case "", "queues", "all":
	case "classic_queues":
		if q.QueueType() != "classic" {
			return false
		}
	case "quorum_queues":
		if q.QueueType() != "quorum" {
			return false
		}
	case "streams":
		if q.QueueType() != "stream" {
			return false
		}
	default:
		return false
	}
	return true
}

func (p Policy) matchesName(name string) bool {
	re, err := compilePattern(p.Pattern)
	return err == nil && re.MatchString(name)
}

// patterns caches compiled patterns: a plan matches every queue against
// every policy. It is emptied when it reaches maxCachedPatterns, so that a
// long-running caller reading many brokers' policies does not keep every
// pattern it ever saw (rmqtopo's own policies have literal patterns and
// never get here: see PolicyIndex).
var (
	patterns      sync.Map // string -> *regexp.Regexp
	patternsSaved atomic.Int64
)

const maxCachedPatterns = 4096

func compilePattern(p string) (*regexp.Regexp, error) {
	if re, ok := patterns.Load(p); ok {
		return re.(*regexp.Regexp), nil
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, err
	}
	if patternsSaved.Add(1) > maxCachedPatterns {
		patterns.Clear()
		patternsSaved.Store(1)
	}
	patterns.Store(p, re)
	return re, nil
}

// AppliesExchange reports whether p applies to exchange e.
func (p Policy) AppliesExchange(e Exchange) bool {
	return p.concernsExchange(e) && p.matchesName(e.Name)
}

// concernsExchange is AppliesExchange but for the pattern.
func (p Policy) concernsExchange(e Exchange) bool {
	return p.Vhost == e.Vhost && (p.ApplyTo == "exchanges" || p.ApplyTo == "all")
}

// Matching returns the policies of ps that apply to q, highest priority
// first, ties by name.
func Matching(q Queue, ps []Policy) []Policy {
	return byPriority(ps, func(p Policy) bool { return p.Applies(q) })
}

// MatchingExchange is Matching for an exchange.
func MatchingExchange(e Exchange, ps []Policy) []Policy {
	return byPriority(ps, func(p Policy) bool { return p.AppliesExchange(e) })
}

func byPriority(ps []Policy, applies func(Policy) bool) []Policy {
	var out []Policy
	for _, p := range ps {
		if applies(p) {
			out = append(out, p)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Priority != out[j].Priority {
			return out[i].Priority > out[j].Priority
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Effective returns the attributes RabbitMQ gives q, by policy key, when
// policy (nil for none) is the user policy that applies to it and
// operator the operator policies that may: arguments, then the policy's
// keys the arguments leave unset or, for limits, the lower value, then
// each matching operator policy's limits if lower. Arguments no policy
// can set are left out.
func Effective(q Queue, policy *Policy, operator []Policy) Args {
	out := Args{}
	for arg, v := range q.Arguments {
		if k, ok := PolicyKey(arg); ok {
			out[k] = v
		}
	}
	if policy != nil {
		merge(out, policy.Definition, false)
	}
	if ops := Matching(q, operator); len(ops) > 0 {
		merge(out, ops[0].Definition, true)
	}
	return out
}

func merge(out, def Args, limitsOnly bool) {
	for k, v := range def {
		was, set := out[k]
		switch {
		case limitKeys[k] && set:
			if lower(v, was) {
				out[k] = v
			}
		case !set && (!limitsOnly || limitKeys[k]):
			out[k] = v
		}
	}
}

// lower reports whether a is a smaller integer than b; values that are not
// integers are never lower.
func lower(a, b any) bool {
	x, ok1 := a.(int64)
	y, ok2 := b.(int64)
	return ok1 && ok2 && x < y
}

// ApplyToQueues reports whether an apply-to value concerns queues.
func ApplyToQueues(applyTo string) bool {
	return applyTo == "" || applyTo == "all" || strings.HasSuffix(applyTo, "queues") || applyTo == "streams"
}

// EffectiveUnder is Effective with the user policy that applies to q among
// policies.
func EffectiveUnder(q Queue, policies, operator []Policy) Args {
	var p *Policy
	if ps := Matching(q, policies); len(ps) > 0 {
		p = &ps[0]
	}
	return Effective(q, p, operator)
}
