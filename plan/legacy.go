package plan

import (
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Queues an earlier rmqtopo made. Since spec/policies.go moved what
// rmqtopo never changes in place (a work queue's dead-lettering, its
// default delivery limit) from each queue's policy into queue arguments,
// a live queue declared by an earlier rmqtopo lacks those arguments; they
// are immutable, so wanting them would replace every such queue. Instead
// the queue stays as it is and keeps its own policy (contract.QueuePolicy)
// carrying them beside the attributes the spec sets: applying the new
// shape to an old broker writes nothing for it. Only a queue created from
// here on carries them as arguments.

// KeepLegacy is what Diff plans against: desired with every queue an
// earlier rmqtopo made kept in that shape (see foldLegacy). The importer
// uses it to recognise such queues.
func KeepLegacy(live, desired topology.Topology, release topology.Version) topology.Topology {
	desired, _ = foldNative(live, desired, nil)
	t, _ := foldLegacy(live, desired, nil, release)
	return t
}

// WithDefaults is desired with every queue that differs from its live
// counterpart only by the release's default arguments made that queue (see
// withDefaults), as Diff compares them; the importer recognises queues by
// it.
func WithDefaults(live, desired topology.Topology, release topology.Version) topology.Topology {
	if topology.DefaultArguments(release, "quorum") == nil {
		return desired
	}
	liveAt := make(map[topology.Address]int, len(live.Queues))
	for i, q := range live.Queues {
		liveAt[q.Addr()] = i
	}
	d := defaultsView{release: release, desired: desired, live: live}
	out := desired
	out.Queues = nil
	for i, q := range desired.Queues {
		at, ok := liveAt[q.Addr()]
		if !ok {
			continue
		}
		if same, ok := d.withDefaults(live.Queues[at], q); ok {
			if out.Queues == nil {
				out.Queues = slices.Clone(desired.Queues)
			}
			out.Queues[i] = same
		}
	}
	if out.Queues == nil {
		return desired
	}
	return out
}

// foldLegacy returns desired with every queue whose live counterpart
// lacks arguments that a policy can carry turned back into that shape:
// the queue without them, its rmqtopo policy with them. It also returns
// the queues so kept, with the arguments each lacks. A queue in reshape
// (the spec's migrate: true) is left to the usual comparison: its replace
// becomes a migration into the new shape. A queue that differs from its
// live counterpart only by an argument release gives it by default
// (topology.DefaultArguments) is the live queue (see withDefaults).
// desired is not changed; the result shares its unchanged parts.
func foldLegacy(live, desired topology.Topology, reshape map[topology.Address]bool, release topology.Version) (topology.Topology, map[topology.Address][]string) {
	if len(live.Queues) == 0 || len(desired.Queues) == 0 {
		return desired, nil
	}
	liveAt := make(map[topology.Address]int, len(live.Queues)) // an index: a large live vhost is copied once already
	for i, q := range live.Queues {
		liveAt[q.Addr()] = i
	}
	var folded map[topology.Address][]string
	var queues []topology.Queue
	moved := map[topology.Address]topology.Args{} // policy address -> keys to add
	defaults := defaultsView{release: release, desired: desired, live: live}
	for i, q := range desired.Queues {
		at, ok := liveAt[q.Addr()]
		if !ok || reshape[q.Addr()] {
			continue
		}
		if same, ok := defaults.withDefaults(live.Queues[at], q); ok {
			if queues == nil {
				queues = slices.Clone(desired.Queues)
			}
			queues[i], q = same, same
		}
		kept, keys, ok := foldQueue(live.Queues[at], q)
		if !ok {
			continue
		}
		defaults.keepLegacyDefaults(q, keys)
		if queues == nil {
			queues = slices.Clone(desired.Queues)
		}
		if folded == nil {
			folded = map[topology.Address][]string{}
		}
		queues[i] = kept
		for k := range keys {
			folded[q.Addr()] = append(folded[q.Addr()], "x-"+k)
		}
		slices.Sort(folded[q.Addr()])
		moved[topology.Address{Kind: topology.KindPolicy, Vhost: q.Vhost, Name: contract.QueuePolicy(q.Name)}] = keys
	}
	if queues == nil {
		return desired, nil
	}
	out := desired
	out.Queues = queues
	if len(moved) > 0 {
		out.Policies = withMovedKeys(desired.Policies, moved)
	}
	return out, folded
}

// defaultsView decides whether a desired queue is its live counterpart
// but for an argument the release gives by default.
type defaultsView struct {
	release topology.Version
	desired topology.Topology
	live    topology.Topology
	index   *topology.PolicyIndex // the desired policies, made when first needed
	// legacyKeys are the keys of each live rmqtopo queue policy, by
	// address, made when first needed.
	legacyKeys map[topology.Address]topology.Args
}

// withDefaults returns want as the live queue was, and true, where they
// differ only by arguments of the release's defaults that mean the same on
// it: want declares the default and was, declared without it, has it by
// default (a queue of a release that writes no default limit, on 4.0+);
// or was declares it (made on 3.x, upgraded) and want, without it, would
// have the same effective value with its policy. Applying want would
// otherwise replace a queue that already is what the spec asks.
func (d *defaultsView) withDefaults(was, want topology.Queue) (topology.Queue, bool) {
	defaults := topology.DefaultArguments(d.release, want.QueueType())
	if len(defaults) == 0 || was.QueueType() != want.QueueType() {
		return want, false
	}
	args := maps.Clone(want.Arguments)
	changed := false
	for k, dv := range defaults {
		w, wantHas := want.Arguments[k]
		x, wasHas := was.Arguments[k]
		switch {
		case wantHas && !wasHas && reflect.DeepEqual(w, dv) && !d.inLegacyPolicy(want, k):
			delete(args, k)
			changed = true
		case !wantHas && wasHas && reflect.DeepEqual(x, dv) && d.sameEffect(was, want, k, dv):
			args[k] = x
			changed = true
		}
	}
	if !changed {
		return want, false
	}
	want.Arguments = args
	return want, true
}

// keepLegacyDefaults adds to keys, the policy keys a kept queue q's
// policy carries, the release's defaults its live rmqtopo policy carries
// and q does not set: the earlier rmqtopo's policy stays as it is, the
// same on the release.
func (d *defaultsView) keepLegacyDefaults(q topology.Queue, keys topology.Args) {
	for k, dv := range topology.DefaultArguments(d.release, q.QueueType()) {
		pk, ok := topology.PolicyKey(k)
		if _, set := q.Arguments[k]; !ok || set || keys[pk] != nil || !d.inLegacyPolicy(q, k) {
			continue
		}
		if reflect.DeepEqual(d.legacyKeys[topology.Address{Kind: topology.KindPolicy, Vhost: q.Vhost, Name: contract.QueuePolicy(q.Name)}][pk], dv) {
			keys[pk] = dv
		}
	}
}

// inLegacyPolicy reports whether the live rmqtopo policy of q carries the
// argument k as its policy key: an earlier rmqtopo's shape, which
// foldQueue keeps as it is.
func (d *defaultsView) inLegacyPolicy(q topology.Queue, k string) bool {
	if d.legacyKeys == nil {
		d.legacyKeys = map[topology.Address]topology.Args{}
		for _, p := range d.live.Policies {
			if contract.IsManagedPolicy(p.Name) {
				d.legacyKeys[p.Addr()] = p.Definition
			}
		}
	}
	pk, ok := topology.PolicyKey(k)
	if !ok {
		return false
	}
	_, set := d.legacyKeys[topology.Address{Kind: topology.KindPolicy, Vhost: q.Vhost, Name: contract.QueuePolicy(q.Name)}][pk]
	return set
}

// sameEffect reports whether was (with argument k) and want (without it,
// so with default dv) have the same effective k under want's policy.
func (d *defaultsView) sameEffect(was, want topology.Queue, k string, dv any) bool {
	pk, ok := topology.PolicyKey(k)
	if !ok {
		return true
	}
	if d.index == nil {
		d.index = topology.NewPolicyIndex(d.desired.Policies)
	}
	var pol *topology.Policy
	if ps := d.index.Matching(want); len(ps) > 0 {
		pol = &ps[0]
	}
	effWant, set := topology.Effective(want, pol, nil)[pk]
	if !set {
		effWant = dv
	}
	return reflect.DeepEqual(topology.Effective(was, pol, nil)[pk], effWant)
}

// foldQueue reports whether want can keep the live queue was by leaving
// to its policy the arguments was lacks, and returns want without them
// and those arguments as policy keys. It folds only arguments rmqtopo
// itself sets on its own work queues; a queue lacking any other, or
// holding one with another value, is left to the usual comparison.
func foldQueue(was, want topology.Queue) (topology.Queue, topology.Args, bool) {
	if was.Durable != want.Durable || was.AutoDelete != want.AutoDelete || was.QueueType() != want.QueueType() {
		return want, nil, false // replaced anyway, into the new shape
	}
	var keys topology.Args
	for k, v := range want.Arguments {
		if _, set := was.Arguments[k]; set {
			continue
		}
		pk, settable := topology.PolicyKey(k)
		if !settable || !foldable[k] {
			return want, nil, false
		}
		if keys == nil {
			keys = topology.Args{}
		}
		keys[pk] = v
	}
	if keys == nil {
		return want, nil, false
	}
	kept := want
	kept.Arguments = make(topology.Args, len(want.Arguments))
	for k, v := range want.Arguments {
		if _, set := was.Arguments[k]; set {
			kept.Arguments[k] = v
		}
	}
	return kept, keys, true
}

// foldable are the arguments a work queue of rmqtopo's own contract is
// declared with (contract.ArgumentKeys), which an earlier rmqtopo kept in
// the queue's policy.
var foldable = func() map[string]bool {
	out := map[string]bool{}
	for _, k := range contract.ArgumentKeys {
		out["x-"+k] = true
	}
	return out
}()

// withMovedKeys returns policies with the keys of moved added to the
// rmqtopo queue policy at each address, creating the policy where the
// spec gives the queue none. The spec's own keys win: they are the ones
// that may change.
func withMovedKeys(policies []topology.Policy, moved map[topology.Address]topology.Args) []topology.Policy {
	out := slices.Clone(policies)
	for i, p := range out {
		keys, ok := moved[p.Addr()]
		if !ok {
			continue
		}
		def := topology.Args{}
		for k, v := range keys {
			def[k] = v
		}
		for k, v := range p.Definition {
			def[k] = v
		}
		out[i].Definition = topology.NormalizeArgs(def)
		delete(moved, p.Addr())
	}
	for a, keys := range moved {
		name := strings.TrimPrefix(a.Name, contract.QueuePolicy(""))
		out = append(out, topology.Policy{Vhost: a.Vhost, Name: a.Name, Pattern: contract.ExactPattern(name),
			ApplyTo: "queues", Priority: contract.ManagedPolicyPriority, Definition: topology.NormalizeArgs(keys)})
	}
	t := topology.Topology{Policies: out}
	t.Sort()
	return t.Policies
}
