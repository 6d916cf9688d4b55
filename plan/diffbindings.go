package plan

import (
	"fmt"
	"slices"

	"github.com/rmqtopo/rmqtopo/topology"
)

func (d *differ) diffBindings(live, desired topology.Topology) {
	liveBy := make(map[topology.Address]topology.Binding, len(live.Bindings))
	for _, b := range live.Bindings {
		b := canonicalBinding(b)
		liveBy[b.Addr()] = b
	}
	wanted := d.wantedBindings(desired.Bindings)
	for _, w := range wanted {
		a, b := w.a, w.b
		after := d.object()
		after.Binding = b
		was, ok := liveBy[a]
		switch gone := d.replacedEndpoint(*b); {
		case gone != "":
			d.add(Change{Action: Create, Address: a, After: after, Details: &Details{Reasons: []Reason{{Kind: ReasonRecreated, Subject: gone}}}})
		case ok:
			d.add(Change{Action: NoOp, Address: a, Before: &Object{Binding: ptr(was)}, After: after})
		default:
			d.add(Change{Action: Create, Address: a, After: after})
		}
	}
	if len(liveBy) == 0 {
		return
	}
	desiredExchanges := make(map[topology.Address]bool, len(desired.Exchanges))
	for _, e := range desired.Exchanges {
		desiredExchanges[e.Addr()] = true
	}
	isWanted := func(a topology.Address) bool {
		_, ok := slices.BinarySearchFunc(wanted, a, func(w addressed, a topology.Address) int { return w.a.Compare(a) })
		return ok
	}
	routes := d.wantedRoutes(wanted)
	for _, a := range sortedKeysExcept(liveBy, isWanted) {
		b := liveBy[a]
		if d.replacedEndpoint(b) != "" || !d.vhosts[a.Vhost] || d.keepsRoute(a, b, routes) {
			continue
		}
		source := sourceAddr(b)
		// rmqtopo reconciles every binding of the exchanges it manages, so
		// that a schedule change moves the retry exchange's bindings from the
		// old wait queues to the new ones in one apply. A built-in amq.*
		// source is never in a Topology, so there only rmqtopo's own bindings
		// are removed.
		var remove bool
		switch {
		case topology.Reserved(b.Source):
			remove = b.Source != "" && d.opts.Owned[a]
		default:
			remove = desiredExchanges[source] && (d.opts.Owned[a] || d.opts.Owned[source]) && len(d.opts.Others[a]) == 0
		}
		if remove {
			d.add(Change{Action: Delete, Address: a, Before: &Object{Binding: &b}, Details: &Details{Reasons: notInSpec()}})
		}
	}
}

// route is what a binding routes, without where to: its vhost, source
// and key (destination type, routing key, arguments).
type route struct{ vhost, source, key string }

// wantedRoutes are the routes of the wanted bindings, only when some
// queue is left behind (keepsRoute reads them).
func (d *differ) wantedRoutes(wanted []addressed) map[route]bool {
	if len(d.leftBehind) == 0 {
		return nil
	}
	out := map[route]bool{}
	for _, w := range wanted {
		out[route{w.a.Vhost, w.b.Source, w.a.Key}] = true
	}
	return out
}

// keepsRoute reports whether binding b, at a, stays because its queue is
// left behind: a queue kept without prune keeps what routes to it, so that
// no publish becomes unroutable because a queue left the spec. A route
// the spec now gives to another destination (a renamed queue) moves
// there instead, and b goes.
func (d *differ) keepsRoute(a topology.Address, b topology.Binding, routes map[route]bool) bool {
	return b.DestinationType == topology.DestQueue && d.leftBehind[destinationAddr(b)] && !routes[route{a.Vhost, b.Source, a.Key}]
}

// addressed is a binding with its address, which is all of it in another
// form: computed once, because it renders the binding's arguments.
type addressed struct {
	a topology.Address
	b *topology.Binding
}

// wantedBindings returns the desired bindings in canonical form, sorted by
// address, without duplicates. An expanded spec's bindings are sorted and
// canonical already, and are used as they are; anything else is copied.
func (d *differ) wantedBindings(desired []topology.Binding) []addressed {
	out := make([]addressed, 0, len(desired))
	// Keys with arguments repeat across queues (every retry binding of
	// attempt 2 has the same): the plan keeps one copy of each.
	keys := map[string]string{}
	for i := range desired {
		b := &desired[i]
		if !topology.IsNormal(b.Arguments) {
			c := canonicalBinding(*b)
			b = &c
		}
		a := b.Addr()
		if len(b.Arguments) > 0 {
			if k, ok := keys[a.Key]; ok {
				a.Key = k
			} else {
				keys[a.Key] = a.Key
			}
		}
		out = append(out, addressed{a, b})
	}
	cmp := func(x, y addressed) int { return x.a.Compare(y.a) }
	if !slices.IsSortedFunc(out, cmp) {
		slices.SortStableFunc(out, cmp)
	}
	// Of equal addresses the last wins, as it would in a map.
	n := 0
	for _, w := range out {
		if n > 0 && out[n-1].a == w.a {
			out[n-1] = w
			continue
		}
		out[n] = w
		n++
	}
	return out[:n]
}

// replacedEndpoint names the endpoint of b that the plan replaces, or ""
// when neither is replaced.
func (d *differ) replacedEndpoint(b topology.Binding) string {
	if s := sourceAddr(b); d.replaced[s] {
		return fmt.Sprintf("exchange %q", s.Name)
	}
	if t := destinationAddr(b); d.replaced[t] {
		return fmt.Sprintf("%s %q", t.Kind, t.Name)
	}
	return ""
}

func sourceAddr(b topology.Binding) topology.Address {
	return topology.Address{Kind: topology.KindExchange, Vhost: b.Vhost, Name: b.Source}
}

func destinationAddr(b topology.Binding) topology.Address {
	kind := topology.KindQueue
	if b.DestinationType == topology.DestExchange {
		kind = topology.KindExchange
	}
	return topology.Address{Kind: kind, Vhost: b.Vhost, Name: b.Destination}
}
