package plan

import (
	"maps"
	"slices"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Native queues an earlier rmqtopo made. Those carry their whole schedule
// in their arguments (contract.NativeArguments), where the spec now gives
// a native queue only a marker, with its schedule in its policy and in its
// binding from the schedule exchange (contract's inplace.go). Arguments
// are immutable: wanting the new shape would replace every such queue, a
// migration that moves each message for nothing. So a live native queue
// of the earlier shape stays as it is: the plan wants it with its schedule
// in its arguments, without the schedule's policy keys (an argument caps
// the policy anyway: the lower wins) and without the schedule binding,
// which the helper does not look for while the arguments carry it. The
// same schedule plans nothing; another one is a replace of the queue, as
// it was before, or, with migrate: true, a migration into the in-place
// shape, after which schedule changes are made in place.

// foldNative returns desired with every native queue whose live
// counterpart carries its schedule in its arguments turned back into that
// shape (see above), and the addresses of the queues so kept. A queue in
// reshape (migrate: true) is left to the usual comparison. desired is not
// changed; the result shares its unchanged parts.
func foldNative(live, desired topology.Topology, reshape map[topology.Address]bool) (topology.Topology, map[topology.Address]bool) {
	if len(live.Queues) == 0 {
		return desired, nil
	}
	liveAt := make(map[topology.Address]int, len(live.Queues))
	for i, q := range live.Queues {
		liveAt[q.Addr()] = i
	}
	var kept map[topology.Address]bool
	var queues []topology.Queue
	for i, q := range desired.Queues {
		at, ok := liveAt[q.Addr()]
		if !ok || reshape[q.Addr()] || !contract.IsInPlace(q.Arguments) {
			continue
		}
		if _, err := contract.ParseNative(live.Queues[at].Arguments); err != nil {
			continue // not native, or already in place
		}
		n, ok := scheduleBinding(desired, q)
		if !ok {
			continue
		}
		if queues == nil {
			queues, kept = slices.Clone(desired.Queues), map[topology.Address]bool{}
		}
		args := maps.Clone(q.Arguments)
		delete(args, contract.ArgDelayedRetryType)
		maps.Copy(args, contract.NativeArguments(n.Delays, n.Jitter))
		queues[i].Arguments = topology.NormalizeArgs(args)
		kept[q.Addr()] = true
	}
	if kept == nil {
		return desired, nil
	}
	out := desired
	out.Queues = queues
	out.Policies = withoutSchedulePolicy(desired.Policies, kept)
	out.Bindings, out.Exchanges = withoutScheduleBindings(desired, kept)
	return out, kept
}

// scheduleBinding reads queue q's schedule from its binding from the
// schedule exchange in t.
func scheduleBinding(t topology.Topology, q topology.Queue) (contract.Native, bool) {
	for _, b := range t.Bindings {
		if isScheduleBinding(b) && b.Vhost == q.Vhost && b.Destination == q.Name {
			n, err := contract.ParseSchedule(b.Arguments)
			return n, err == nil
		}
	}
	return contract.Native{}, false
}

// isScheduleBinding reports whether b is a native queue's binding from
// the schedule exchange.
func isScheduleBinding(b topology.Binding) bool {
	return b.Source == contract.ScheduleExchange && b.DestinationType == topology.DestQueue && b.RoutingKey == b.Destination
}

// withoutSchedulePolicy returns policies with the schedule's keys taken
// out of the own policy of each kept queue, and a policy left empty
// dropped.
func withoutSchedulePolicy(policies []topology.Policy, kept map[topology.Address]bool) []topology.Policy {
	out := make([]topology.Policy, 0, len(policies))
	for _, p := range policies {
		kind, name, ok := contract.ManagedPolicyTarget(p.Name)
		if !ok || kind != "queue" || p.Name != contract.QueuePolicy(name) ||
			!kept[topology.Address{Kind: topology.KindQueue, Vhost: p.Vhost, Name: name}] {
			out = append(out, p)
			continue
		}
		def := maps.Clone(p.Definition)
		for _, k := range contract.ScheduleKeys {
			delete(def, k)
		}
		if len(def) > 0 {
			p.Definition = topology.NormalizeArgs(def)
			out = append(out, p)
		}
	}
	return out
}

// withoutScheduleBindings returns t's bindings without the schedule
// bindings of the kept queues, and its exchanges without the schedule
// exchange of a vhost where no schedule binding is left.
func withoutScheduleBindings(t topology.Topology, kept map[topology.Address]bool) ([]topology.Binding, []topology.Exchange) {
	bindings := make([]topology.Binding, 0, len(t.Bindings))
	used := map[string]bool{}
	for _, b := range t.Bindings {
		if isScheduleBinding(b) {
			if kept[topology.Address{Kind: topology.KindQueue, Vhost: b.Vhost, Name: b.Destination}] {
				continue
			}
			used[b.Vhost] = true
		}
		bindings = append(bindings, b)
	}
	exchanges := slices.DeleteFunc(slices.Clone(t.Exchanges), func(e topology.Exchange) bool {
		return e.Name == contract.ScheduleExchange && !used[e.Vhost]
	})
	return bindings, exchanges
}
