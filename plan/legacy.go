package plan

import (
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
func KeepLegacy(live, desired topology.Topology) topology.Topology {
	t, _ := foldLegacy(live, desired, nil)
	return t
}

// foldLegacy returns desired with every queue whose live counterpart
// lacks arguments that a policy can carry turned back into that shape:
// the queue without them, its rmqtopo policy with them. It also returns
// the queues so kept, with the arguments each lacks. A queue in reshape
// (the spec's migrate: true) is left to the usual comparison: its replace
// becomes a migration into the new shape. desired is not changed; the
// result shares its unchanged parts.
func foldLegacy(live, desired topology.Topology, reshape map[topology.Address]bool) (topology.Topology, map[topology.Address][]string) {
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
	for i, q := range desired.Queues {
		at, ok := liveAt[q.Addr()]
		if !ok || reshape[q.Addr()] {
			continue
		}
		kept, keys, ok := foldQueue(live.Queues[at], q)
		if !ok {
			continue
		}
		if queues == nil {
			queues = slices.Clone(desired.Queues)
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
	out.Policies = withMovedKeys(desired.Policies, moved)
	return out, folded
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

// foldable are the arguments nativeArgs (spec/policies.go) sets, which an
// earlier rmqtopo kept in the queue's policy.
var foldable = map[string]bool{
	"x-dead-letter-exchange":    true,
	"x-dead-letter-routing-key": true,
	"x-dead-letter-strategy":    true,
	"x-overflow":                true,
	"x-delivery-limit":          true,
}

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
