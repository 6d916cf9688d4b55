package render

import (
	"sort"
	"strings"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

// planGroup is the changes of one of the spec's queues: the work queue and
// what was generated for it (retry exchange, wait queues, DLX, DLQ,
// parking lot, their bindings), or of a vhost's shared objects (Queue "").
type planGroup struct {
	Vhost string
	Queue string
	// Changes point into the plan: a copy of a large plan's changes was
	// its size again.
	Changes []*plan.Change
}

// groupChanges sorts a plan's changes into planGroups, in natural order of
// vhost then queue, each vhost's shared group after its queues. The plan
// does not carry which spec queue an object was generated for, so the
// names say it, through the contract's naming (contract.RetryExchange and
// the rest) and that of the presets. A name is taken as generated for Q
// only when Q is itself a queue of the plan (any action, no-ops included):
// a spec queue that merely ends in ".dlq" stays a group of its own.
func groupChanges(all []plan.Change) []planGroup {
	roots := planRoots(all)
	groups := map[groupKey]*planGroup{}
	for i := range all {
		c := &all[i]
		if c.Action == plan.NoOp {
			continue
		}
		k := groupKey{c.Address.Vhost, groupOf(c, roots)}
		g := groups[k]
		if g == nil {
			g = &planGroup{Vhost: k.vhost, Queue: k.queue}
			groups[k] = g
		}
		g.Changes = append(g.Changes, c)
	}
	out := make([]planGroup, 0, len(groups))
	for _, g := range groups {
		sort.SliceStable(g.Changes, func(i, j int) bool { return changeLess(*g.Changes[i], *g.Changes[j]) })
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Vhost != b.Vhost {
			return naturalLess(a.Vhost, b.Vhost)
		}
		if (a.Queue == "") != (b.Queue == "") {
			return b.Queue == ""
		}
		return naturalLess(a.Queue, b.Queue)
	})
	return out
}

type groupKey struct{ vhost, queue string }

// planRoots are the plan's queues that head a group: every queue that is
// not a wait queue and not generated for another queue of the plan.
func planRoots(all []plan.Change) map[groupKey]bool {
	queues := map[groupKey]bool{}
	for _, c := range all {
		if c.Address.Kind == topology.KindQueue {
			queues[groupKey{c.Address.Vhost, c.Address.Name}] = true
		}
	}
	roots := map[groupKey]bool{}
	for k := range queues {
		if contract.IsWaitQueue(k.queue) {
			continue
		}
		if b := contract.GeneratedFor(k.queue); b == k.queue || !queues[groupKey{k.vhost, b}] {
			roots[k] = true
		}
	}
	return roots
}

// groupOf names the root queue c belongs to, or "" for shared objects
// (vhosts, policies, shared wait queues, exchanges of the spec's own). A
// binding goes with its destination when that has a group (an exchange of
// the spec bound to a work queue), else with its source (a retry exchange
// bound to a shared wait queue).
func groupOf(c *plan.Change, roots map[groupKey]bool) string {
	a := c.Address
	rootOf := func(name string) string {
		for _, n := range []string{name, contract.GeneratedFor(name)} {
			if roots[groupKey{a.Vhost, n}] {
				return n
			}
		}
		return ""
	}
	switch a.Kind {
	case topology.KindQueue, topology.KindExchange:
		return rootOf(a.Name)
	case topology.KindBinding:
		src, dst, _ := strings.Cut(a.Name, " -> ")
		if b := changeBinding(c); b != nil {
			src, dst = b.Source, b.Destination
		}
		if r := rootOf(dst); r != "" {
			return r
		}
		return rootOf(src)
	}
	return ""
}

func changeBinding(c *plan.Change) *topology.Binding {
	for _, o := range []*plan.Object{c.After, c.Before} {
		if o != nil && o.Binding != nil {
			return o.Binding
		}
	}
	return nil
}

var kindOrder = map[topology.Kind]int{
	topology.KindVhost: 0, topology.KindExchange: 1, topology.KindQueue: 2,
	topology.KindBinding: 3, topology.KindPolicy: 4,
}

// changeLess orders a group's changes for reading: by kind, then by name
// in natural order, then by binding key.
func changeLess(a, b plan.Change) bool {
	x, y := a.Address, b.Address
	if x.Kind != y.Kind {
		return kindOrder[x.Kind] < kindOrder[y.Kind]
	}
	if x.Name != y.Name {
		return naturalLess(x.Name, y.Name)
	}
	return naturalLess(x.Key, y.Key)
}

// naturalLess is plan.NaturalCompare as a less: the one order of names
// in every plan view.
func naturalLess(a, b string) bool { return plan.NaturalCompare(a, b) < 0 }
