package topology

import (
	"regexp/syntax"
	"strings"
	"unicode/utf8"
)

// PolicyIndex answers Matching and MatchingExchange for a fixed list of
// policies without trying every pattern on every object: a plan of
// 150,000 queues has as many rmqtopo policies, and matching each queue
// against each of them is quadratic. Patterns of the form ^literal$ (all
// of rmqtopo's own) are indexed by the one name they match; the others
// are still tried on every object.
type PolicyIndex struct {
	ps    []Policy
	exact map[string][]int // name -> positions in ps of its ^literal$ policies
	rest  []int            // positions of every other policy
}

// NewPolicyIndex indexes ps, which the caller must not change afterwards.
func NewPolicyIndex(ps []Policy) *PolicyIndex {
	x := &PolicyIndex{ps: ps, exact: make(map[string][]int, len(ps))}
	for i, p := range ps {
		if name, ok := exactLiteral(p.Pattern); ok {
			x.exact[name] = append(x.exact[name], i)
		} else {
			x.rest = append(x.rest, i)
		}
	}
	return x
}

// Matching is Matching(q, ps) for the indexed ps.
func (x *PolicyIndex) Matching(q Queue) []Policy {
	return x.match(q.Name, func(p *Policy) bool { return p.concernsQueue(q) })
}

// MatchingExchange is MatchingExchange(e, ps) for the indexed ps.
func (x *PolicyIndex) MatchingExchange(e Exchange) []Policy {
	return x.match(e.Name, func(p *Policy) bool { return p.concernsExchange(e) })
}

// match filters the policies that can match name in their original order
// (byPriority's sort is stable, so order decides ties), then sorts them as
// byPriority does. A ^literal$ policy filed under name matches it without
// its regexp being compiled: 150,000 compiled patterns are most of a
// plan's memory.
func (x *PolicyIndex) match(name string, concerns func(*Policy) bool) []Policy {
	exact := x.exact[name]
	var out []Policy
	i, j := 0, 0
	for i < len(exact) || j < len(x.rest) {
		var k int
		literal := j == len(x.rest) || (i < len(exact) && exact[i] < x.rest[j])
		if literal {
			k, i = exact[i], i+1
		} else {
			k, j = x.rest[j], j+1
		}
		if p := &x.ps[k]; concerns(p) && (literal || p.matchesName(name)) {
			out = append(out, x.ps[k])
		}
	}
	return byPriority(out, func(Policy) bool { return true })
}

// exactLiteral returns the one string pattern matches when it is
// ^literal$ (as regexp.Compile reads it), case-sensitive.
func exactLiteral(pattern string) (string, bool) {
	if !strings.HasPrefix(pattern, "^") || !strings.HasSuffix(pattern, "$") {
		return "", false
	}
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil || re.Op != syntax.OpConcat || len(re.Sub) != 3 {
		return "", false
	}
	lit := re.Sub[1]
	if re.Sub[0].Op != syntax.OpBeginText || re.Sub[2].Op != syntax.OpEndText ||
		lit.Op != syntax.OpLiteral || lit.Flags&syntax.FoldCase != 0 {
		return "", false
	}
	s := string(lit.Rune)
	// A name that is not valid UTF-8 matches U+FFFD in a pattern; such
	// patterns are left to the regexp.
	if strings.ContainsRune(s, utf8.RuneError) {
		return "", false
	}
	return s, true
}
