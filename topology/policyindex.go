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
	ps []Policy
	// exact files each ^literal$ policy by the name it matches: its
	// position in ps, or, for a name with several, all their positions in
	// more (a slice for every name was most of the index).
	exact map[string]int
	more  map[string][]int
	rest  []int // positions of every other policy
}

// NewPolicyIndex indexes ps, which the caller must not change afterwards.
func NewPolicyIndex(ps []Policy) *PolicyIndex {
	x := &PolicyIndex{ps: ps, exact: make(map[string]int, len(ps))}
	for i, p := range ps {
		name, ok := exactLiteral(p.Pattern)
		if !ok {
			x.rest = append(x.rest, i)
			continue
		}
		first, dup := x.exact[name]
		switch {
		case !dup:
			x.exact[name] = i
		case x.more == nil:
			x.more = map[string][]int{name: {first, i}}
		case x.more[name] == nil:
			x.more[name] = []int{first, i}
		default:
			x.more[name] = append(x.more[name], i)
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
	var one [1]int
	exact := x.more[name]
	if i, ok := x.exact[name]; ok && exact == nil {
		one[0] = i
		exact = one[:]
	}
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
	if s, ok := quotedLiteral(pattern[1 : len(pattern)-1]); ok {
		return s, true
	}
	return parsedLiteral(pattern)
}

// regexpMeta are the characters regexp.QuoteMeta escapes.
const regexpMeta = `\.+*?()|[]{}^$`

// quotedLiteral reads s as regexp.QuoteMeta writes a literal, as
// contract.ExactPattern does: characters other than regexpMeta, and those
// escaped by a backslash. It answers without parsing for every rmqtopo
// policy; anything else (classes, groups, flags) it leaves to the parser.
func quotedLiteral(s string) (string, bool) {
	if s == "" || !utf8.ValidString(s) || strings.ContainsRune(s, utf8.RuneError) {
		return "", false
	}
	if !strings.Contains(s, `\`) {
		if strings.ContainsAny(s, regexpMeta) {
			return "", false
		}
		return s, true
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			if i+1 == len(s) || !strings.ContainsRune(regexpMeta, rune(s[i+1])) {
				return "", false
			}
			i++
			b = append(b, s[i])
		case strings.IndexByte(regexpMeta, c) >= 0:
			return "", false
		default:
			b = append(b, c)
		}
	}
	return string(b), true
}

// parsedLiteral is exactLiteral by the regexp parser.
func parsedLiteral(pattern string) (string, bool) {
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
