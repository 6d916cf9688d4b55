package plan

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Policies and queues: rmqtopo carries the mutable attributes of the
// queues it declares in policies of its own (contract.QueuePolicy), so
// that changing one is a policy update. This file decides two things Diff
// needs from that:
//
//   - whether a live queue whose arguments differ from the desired ones can
//     stay (adoption): it can when every argument the spec pins is there as
//     pinned, and every other argument the live queue carries is one a
//     policy can also set and gives the same effective value as the desired
//     queue with its policy. An argument beats a policy for everything but
//     numeric limits, where the lower value wins, so a leftover argument is
//     harmless exactly when its effective value is the wanted one; other
//     differences need a replace, and the reason says why.
//   - which policies shadow which: only one policy applies to a queue, so a
//     user policy (in the spec or on the broker) that matches a queue with
//     an rmqtopo policy is either ignored for it or, with a higher
//     priority, takes the place of rmqtopo's; and operator policies cap
//     numeric limits. Check turns these findings into diagnostics.

// Kinds of PolicyConflict.
const (
	// ConflictShadowed: rmqtopo's policy wins; the user policy's keys do
	// not apply to the queues listed.
	ConflictShadowed = "shadowed"
	// ConflictShadows: the user policy wins (or ties); rmqtopo's keys,
	// such as the dead-letter exchange, do not apply to the queues listed.
	ConflictShadows = "shadows"
	// ConflictCapped: an operator policy caps a limit below what rmqtopo's
	// policy sets.
	ConflictCapped = "capped"
	// ConflictApplies: the user policy applies to queues the spec
	// declares with no rmqtopo policy of their own (spec/policies.go);
	// Keys are those that take effect, where the queues' arguments do not
	// win.
	ConflictApplies = "applies"
)

// PolicyConflict is one finding about the policies that govern rmqtopo's
// queues after the plan is applied.
type PolicyConflict struct {
	Kind string
	// Policy is the user or operator policy concerned.
	Policy   string
	Vhost    string
	Priority int64
	// Queues and Exchanges are the objects concerned, sorted.
	Queues    []string
	Exchanges []string
	// Keys are the policy keys that do not take effect.
	Keys []string
	// Capped holds, for ConflictCapped, the effective value of each key
	// and what rmqtopo's policy wanted, by key: [effective, wanted].
	Capped map[string][2]any
}

// policyView is the set of policies in force after the plan, by vhost.
type policyView struct {
	after    []topology.Policy
	operator []topology.Policy
	// index finds the policies of after that match an object without
	// trying every pattern on it.
	index *topology.PolicyIndex
}

func (v *policyView) matching(q topology.Queue) []topology.Policy { return v.index.Matching(q) }

func (v *policyView) matchingExchange(e topology.Exchange) []topology.Policy {
	return v.index.MatchingExchange(e)
}

func newPolicyView(live, desired topology.Topology, operator []topology.Policy) *policyView {
	v := &policyView{operator: operator, after: desired.Policies}
	if len(live.Policies) > 0 {
		// Live policies outside the spec stay unless pruned; a pruned
		// policy is rmqtopo's own, and counting it as staying only ever
		// reports too much.
		v.after = slices.Clip(desired.Policies) // appended to, never changed
		wanted := make(map[topology.Address]bool, len(desired.Policies))
		for _, p := range desired.Policies {
			wanted[p.Addr()] = true
		}
		for _, p := range live.Policies {
			if !wanted[p.Addr()] {
				v.after = append(v.after, p)
			}
		}
	}
	v.index = topology.NewPolicyIndex(v.after)
	return v
}

// policyFor returns the policy that applies to q after the plan, or nil.
func (v *policyView) policyFor(q topology.Queue) *topology.Policy {
	if ps := v.matching(q); len(ps) > 0 {
		return &ps[0]
	}
	return nil
}

// keepsQueue reports whether live queue was can stay as it is when want is
// desired, and the arguments it keeps that the spec leaves to a policy.
func (v *policyView) keepsQueue(was, want topology.Queue) (pinned []string, ok bool) {
	if was.Durable != want.Durable || was.AutoDelete != want.AutoDelete || was.QueueType() != want.QueueType() {
		return nil, false
	}
	for k, w := range want.Arguments {
		if x, set := was.Arguments[k]; !set || !reflect.DeepEqual(x, w) {
			return nil, false
		}
	}
	pol := v.policyFor(want)
	effWas, effWant := topology.Effective(was, pol, nil), topology.Effective(want, pol, nil)
	for _, k := range slices.Sorted(maps.Keys(was.Arguments)) {
		if _, declared := want.Arguments[k]; declared {
			continue
		}
		pk, settable := topology.PolicyKey(k)
		if !settable || !reflect.DeepEqual(effWas[pk], effWant[pk]) {
			return nil, false
		}
		pinned = append(pinned, k)
	}
	return pinned, true
}

// replaceReasons says why was cannot become want in place, naming for
// each leftover argument a policy could set why the policy cannot.
func (v *policyView) replaceReasons(was, want topology.Queue) []Reason {
	pol := v.policyFor(want)
	effWant := topology.Effective(want, pol, nil)
	explained := map[string]Reason{}
	for _, k := range slices.Sorted(maps.Keys(was.Arguments)) {
		pk, settable := topology.PolicyKey(k)
		if _, declared := want.Arguments[k]; declared || !settable {
			continue
		}
		wantV, set := effWant[pk]
		if reflect.DeepEqual(was.Arguments[k], wantV) {
			continue
		}
		why := "a queue argument beats a policy"
		if topology.IsLimitKey(pk) {
			why = "the lower of argument and policy wins"
		}
		target := ""
		if set {
			target = pk + " " + FormatValue(wantV, true)
		}
		explained["queue argument "+k] = Reason{Kind: ReasonArgumentStays, Subject: k,
			Was: FormatValue(was.Arguments[k], true), Want: target, Text: why}
	}
	out := queueDifferences(was, want)
	for i, r := range out {
		if better, ok := explained[r.Subject]; ok && r.Kind == ReasonImmutable {
			out[i] = better
		}
	}
	return out
}

// adoptReason is the Reason of a NoOp that keeps queue q with arguments
// its rmqtopo policy now also sets (see pinnedText).
func adoptReason(q topology.Queue, pinned []string) Reason {
	return Reason{Kind: ReasonAdopted, Text: pinnedText(q, pinned)}
}

// pinnedText says, for each argument of q that its policy now also sets,
// what stays and what a later change needs. An argument beats a policy,
// so a pinned argument has the value the policy gives, and changing it
// needs a replace; for a limit the lower of the two wins instead, so the
// argument stays as a ceiling the policy may go below, and only raising
// the limit above it needs a replace.
func pinnedText(q topology.Queue, pinned []string) string {
	var parts []string
	for _, k := range pinned {
		v := FormatValue(q.Arguments[k], true)
		pk, _ := topology.PolicyKey(k)
		if topology.IsLimitKey(pk) {
			parts = append(parts, fmt.Sprintf("argument %s %s stays on the queue as a ceiling (the lower of it and the policy's %s wins); "+
				"raising %s above %s needs a replace", k, v, pk, pk, v))
			continue
		}
		parts = append(parts, fmt.Sprintf("argument %s %s stays on the queue, the value its policy also gives; a later change of it needs a replace", k, v))
	}
	return strings.Join(parts, "; ")
}

// conflicts finds the policy conflicts of the desired queues and
// exchanges.
func (v *policyView) conflicts(desired topology.Topology) []PolicyConflict {
	byKey := map[string]*PolicyConflict{}
	for _, q := range desired.Queues {
		ps := v.matching(q)
		addQueue := func(c *PolicyConflict) { c.Queues = append(c.Queues, q.Name) }
		if m, top := v.judge(ps, byKey, addQueue); top {
			v.capped(q, m, byKey)
		} else if len(ps) > 0 && !slices.ContainsFunc(ps, isManaged) {
			v.applies(q, ps[0], byKey, addQueue)
		}
	}
	for _, e := range desired.Exchanges {
		v.judge(v.matchingExchange(e), byKey, func(c *PolicyConflict) {
			c.Exchanges = append(c.Exchanges, e.Name)
		})
	}
	return sortedConflicts(byKey)
}

// judge records, for one object whose matching policies are ps (highest
// priority first), every user policy that rmqtopo's policy shadows or that
// shadows it; it returns rmqtopo's policy and whether it is the one that
// applies.
func (v *policyView) judge(ps []topology.Policy, byKey map[string]*PolicyConflict, addObject func(*PolicyConflict)) (topology.Policy, bool) {
	managed := -1
	for i, p := range ps {
		if contract.IsManagedPolicy(p.Name) {
			managed = i
			break
		}
	}
	if managed < 0 {
		return topology.Policy{}, false
	}
	m := ps[managed]
	for i, p := range ps {
		kind, keys := ConflictShadowed, defKeys(p.Definition)
		switch {
		case i == managed || contract.IsManagedPolicy(p.Name):
			continue
		case i < managed || p.Priority == m.Priority:
			kind, keys = ConflictShadows, defKeys(m.Definition)
		}
		record(byKey, kind, p, keys, addObject)
	}
	return m, managed == 0
}

// record adds an object and keys to the conflict of kind with user
// policy p, made on its first object.
func record(byKey map[string]*PolicyConflict, kind string, p topology.Policy, keys []string, addObject func(*PolicyConflict)) {
	key := kind + "\x00" + p.Vhost + "\x00" + p.Name
	c, ok := byKey[key]
	if !ok {
		c = &PolicyConflict{Kind: kind, Policy: p.Name, Vhost: p.Vhost, Priority: p.Priority}
		byKey[key] = c
	}
	addObject(c)
	c.Keys = unionSorted(c.Keys, keys)
}

// attributeKeys are the policy keys that change what becomes of a queue's
// messages, which rmqtopo's own policies set: a user policy's other keys
// (ha-mode, queue-leader-locator, ...) are operations' business.
var attributeKeys = map[string]bool{
	"message-ttl": true, "max-length": true, "max-length-bytes": true, "overflow": true, "expires": true,
	"dead-letter-exchange": true, "dead-letter-routing-key": true, "dead-letter-strategy": true, "delivery-limit": true,
}

func isManaged(p topology.Policy) bool { return contract.IsManagedPolicy(p.Name) }

// applies records the keys of user policy p that take effect on q, a
// queue without an rmqtopo policy: all but those q's arguments set, which
// win, except numeric limits, where the lower value does.
func (v *policyView) applies(q topology.Queue, p topology.Policy, byKey map[string]*PolicyConflict, addObject func(*PolicyConflict)) {
	var keys []string
	for _, k := range defKeys(p.Definition) {
		if _, declared := q.Arguments["x-"+k]; attributeKeys[k] && (!declared || topology.IsLimitKey(k)) {
			keys = append(keys, k)
		}
	}
	if len(keys) > 0 {
		record(byKey, ConflictApplies, p, keys, addObject)
	}
}

// capped records the limits of rmqtopo's policy m that an operator policy
// lowers for q.
func (v *policyView) capped(q topology.Queue, m topology.Policy, byKey map[string]*PolicyConflict) {
	ops := topology.Matching(q, v.operator)
	if len(ops) == 0 {
		return
	}
	op := ops[0]
	eff := topology.Effective(q, &m, v.operator)
	for k, want := range m.Definition {
		got, ok := eff[k]
		if !topology.IsLimitKey(k) || !ok || reflect.DeepEqual(got, want) || !reflect.DeepEqual(got, op.Definition[k]) {
			continue
		}
		key := ConflictCapped + "\x00" + op.Vhost + "\x00" + op.Name
		c, ok := byKey[key]
		if !ok {
			c = &PolicyConflict{Kind: ConflictCapped, Policy: op.Name, Vhost: op.Vhost, Priority: op.Priority,
				Capped: map[string][2]any{}}
			byKey[key] = c
		}
		if len(c.Queues) == 0 || c.Queues[len(c.Queues)-1] != q.Name {
			c.Queues = append(c.Queues, q.Name)
		}
		c.Keys = unionSorted(c.Keys, []string{k})
		c.Capped[k] = [2]any{got, want}
	}
}

func defKeys(d topology.Args) []string { return slices.Sorted(maps.Keys(d)) }

func unionSorted(a, b []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range append(append([]string(nil), a...), b...) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

func sortedConflicts(m map[string]*PolicyConflict) []PolicyConflict {
	out := make([]PolicyConflict, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		c := *m[k]
		sort.Strings(c.Queues)
		sort.Strings(c.Exchanges)
		out = append(out, c)
	}
	return out
}

// governsDesired reports whether a is an rmqtopo policy of a queue or
// exchange that is still in desired: the spec no longer gives that object
// the attributes the policy carried, so the policy goes without Prune. The
// policy of an object that left the spec stays with it unless pruned.
func governsDesired(a topology.Address, desired topology.Topology) bool {
	kind, name, ok := contract.ManagedPolicyTarget(a.Name)
	if !ok {
		return false
	}
	if kind == "exchange" {
		_, found := desired.Exchange(a.Vhost, name)
		return found
	}
	_, found := desired.Queue(a.Vhost, name)
	return found
}
