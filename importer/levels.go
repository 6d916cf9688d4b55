package importer

import (
	"fmt"
	"sort"
	"time"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

// ladder is the vhost's delay ladder (the levels layout), recognised like
// a queue by trial: the ladder a spec with only a levels key generates
// must be in the vhost object for object.
type ladder struct {
	l contract.Ladder
	// levels is the spec's levels key that generates l.
	levels spec.Levels
	// objects holds the ladder's own exchanges, queues and bindings.
	objects map[topology.Address]bool
}

// levelsDelayNote says what the broker does not hold of a levels queue.
const levelsDelayNote = "its delays and jitter live in the service (written into each message's\n" +
	"routing key), not in the broker: the delays are placeholders that only count\n" +
	"the retries, and jitter is left at the spec's default (none)"

// findLadder returns the vhost's ladder: of the ladders whose level
// queues are there, the one whose whole expansion the vhost holds and
// that the most retry exchanges feed (a spec has one ladder; any other
// is written raw). nil when there is none.
func (l *live) findLadder() *ladder {
	seen := map[contract.Ladder]bool{}
	var found []*ladder
	for _, q := range l.t.Queues {
		c, _, err := contract.ParseLevelQueue(q.Name)
		if err != nil || seen[c] {
			continue
		}
		seen[c] = true
		lv := spec.Levels{Resolution: c.Resolution, Max: ladderMax(c)}
		g := spec.ExpandFor(l.release, &spec.File{Spec: spec.Spec{Version: spec.Version, Vhost: l.vhost, WaitQueueType: l.specWaitQueueType(), Levels: &lv}})
		g = plan.WithDefaults(l.t, g, l.release)
		if objects, miss := l.holds(g); miss == "" {
			found = append(found, &ladder{l: c, levels: lv, objects: objects})
		}
	}
	if len(found) == 0 {
		return nil
	}
	fed := func(ld *ladder) int {
		n := 0
		for _, b := range l.t.Bindings {
			if b.DestinationType == topology.DestExchange && b.Destination == ld.l.EntryExchange() {
				n++
			}
		}
		return n
	}
	sort.SliceStable(found, func(i, j int) bool { return fed(found[i]) > fed(found[j]) })
	return found[0]
}

// ladderMax is the levels.max to write for ladder c. The broker holds
// only the number of levels, which a range of maxima gives: the spec's
// default when it gives c, else the roundest value that does.
func ladderMax(c contract.Ladder) time.Duration {
	if d, err := contract.NewLadder(c.Resolution, spec.DefaultLevelsMax); err == nil && d == c {
		return spec.DefaultLevelsMax
	}
	for _, u := range []time.Duration{24 * time.Hour, time.Hour, time.Minute, time.Second, time.Millisecond} {
		m := c.MaxDelay() / u * u
		if d, err := contract.NewLadder(c.Resolution, m); err == nil && d == c {
			return m
		}
	}
	return c.MaxDelay()
}

// deliveryBinding is the binding the ladder's delivery exchange has to
// every queue a spec declares: to the queue itself, or to its return
// queue (dest) when the queue has one; the pattern is the queue's.
func (ld *ladder) deliveryBinding(vhost, queue, dest string) topology.Binding {
	return topology.Binding{Vhost: vhost, Source: ld.l.DeliveryExchange(), Destination: dest,
		DestinationType: topology.DestQueue, RoutingKey: ld.l.DeliveryPattern(queue)}
}

// levels recognises a queue of the levels layout: its retry exchange
// sends the first retries back to Q and the delayed ones to the ladder's
// entry exchange. The delays are the service's, so they are placeholders.
func levels(l *live, q topology.Queue) *candidate {
	retry := contract.RetryExchange(q.Name)
	if _, ok := l.exchanges[retry]; !ok || l.ladder == nil {
		return nil
	}
	sq := l.withReturnQueue(q)
	n := 0
	for _, b := range l.bySource[retry] {
		if _, ok := attemptOf(b); !ok {
			continue
		}
		switch {
		case b.DestinationType == topology.DestQueue && b.Destination == q.Name:
			sq.ImmediateRetries++
		case b.DestinationType == topology.DestExchange && b.Destination == l.ladder.l.EntryExchange():
			n++
		}
	}
	if n == 0 {
		return nil
	}
	delays := make([]time.Duration, n)
	for i := range delays {
		delays[i] = min(time.Second, l.ladder.l.MaxDelay())
	}
	sq.Layout = spec.LayoutLevels
	sq.Retry = policyFor(delays)
	return &candidate{q: sq, what: "rmqtopo retry topology", note: levelsDelayNote}
}

// attemptOf reads the retry number a binding of a retry exchange routes.
func attemptOf(b topology.Binding) (int, bool) {
	if len(b.Arguments) != 2 || b.Arguments["x-match"] != "all" {
		return 0, false
	}
	// The binding of retry k matches the attempt it becomes, k+1.
	n, ok := contract.ParseAttempt(b.Arguments[contract.HeaderAttempt])
	return n - 1, ok && n > contract.FirstAttempt
}

// ladderShared is what the spec's ladder generates beyond any queue: its
// own objects and the delivery exchange's bindings to the queues of the
// vhost, or to their return queues. Empty without a ladder. Which queue
// keeps its return queue is decided later; ladderFits checks the choice.
func (m *model) ladderShared() map[topology.Address]bool {
	out := map[topology.Address]bool{}
	ld := m.l.ladder
	if ld == nil {
		return out
	}
	for a := range ld.objects {
		out[a] = true
	}
	for _, q := range m.l.t.Queues {
		if m.dropped(q.Addr()) {
			continue
		}
		for _, dest := range []string{q.Name, contract.ReturnQueue(q.Name)} {
			b := ld.deliveryBinding(m.l.vhost, q.Name, dest)
			if _, ok := m.l.bindings[b.Addr()]; ok && !m.dropped(topology.Address{Kind: topology.KindQueue, Vhost: m.l.vhost, Name: dest}) {
				out[b.Addr()] = true
			}
		}
	}
	return out
}

// ladderFits says why a spec with the ladder would not expand to what the
// vhost holds, given what the spec generates and the queues it
// recognised, "" when it would: the delivery exchange's bindings are
// exactly one for every queue the spec declares (to its return queue when
// it has one), and nothing else the spec does not generate refers to the
// ladder.
func (m *model) ladderFits(gen map[topology.Address]bool, cands map[string]*candidate) string {
	ld := m.l.ladder
	want := map[topology.Address]bool{}
	for _, q := range m.l.t.Queues {
		if gen[q.Addr()] || m.dropped(q.Addr()) {
			continue
		}
		dest := q.Name
		if c := cands[q.Name]; c != nil {
			dest = spec.ReturnTo(c.q)
		}
		a := ld.deliveryBinding(m.l.vhost, q.Name, dest).Addr()
		if _, ok := m.l.bindings[a]; !ok {
			return fmt.Sprintf("it does not deliver to queue %q (the vhost has no %s)", q.Name, a)
		}
		want[a] = true
	}
	for _, b := range m.l.t.Bindings {
		a := b.Addr()
		switch {
		case m.dropped(a):
		case b.Source == ld.l.DeliveryExchange():
			if !want[a] {
				return fmt.Sprintf("a spec with it would not declare %s", a)
			}
		case gen[a]:
		case ld.objects[exchangeAddr(b.Vhost, b.Source)] || ld.objects[destAddr(b)]:
			return fmt.Sprintf("%s, which a spec with it would not declare, refers to it", a)
		}
	}
	return ""
}

func exchangeAddr(vhost, name string) topology.Address {
	return topology.Address{Kind: topology.KindExchange, Vhost: vhost, Name: name}
}

// destAddr is the address of a binding's destination.
func destAddr(b topology.Binding) topology.Address {
	if b.DestinationType == topology.DestExchange {
		return exchangeAddr(b.Vhost, b.Destination)
	}
	return topology.Address{Kind: topology.KindQueue, Vhost: b.Vhost, Name: b.Destination}
}

// retiredReason is why the objects of a ladder other than the vhost's are
// left out: a spec has one ladder, and a ladder left by a change of the
// levels key is kept by rmqtopo only until its level queues drain.
const retiredReason = "an object of a retired delay ladder (the vhost's ladder is another): " +
	"apply keeps its level queues until they have drained"

// retireOtherLadders leaves out the objects of every ladder but the
// vhost's, and the bindings that touch them; a spec with the vhost's
// ladder would bind their level queues to its delivery exchange.
func (m *model) retireOtherLadders() {
	ld := m.l.ladder
	other := func(name string) bool {
		c, ok := contract.ParseLadderObject(name)
		return ok && c != ld.l
	}
	for _, e := range m.l.t.Exchanges {
		if other(e.Name) {
			m.retire(e.Addr())
		}
	}
	for _, q := range m.l.t.Queues {
		if other(q.Name) {
			m.retire(q.Addr())
		}
	}
	for _, b := range m.l.t.Bindings {
		if other(b.Source) || other(b.Destination) {
			m.retire(b.Addr())
		}
	}
}

func (m *model) retire(a topology.Address) {
	if m.set(a, retiredReason) {
		m.retired = append(m.retired, a)
	}
}

// unretire writes the other ladders back, raw, once the vhost's ladder is
// written raw too.
func (m *model) unretire() {
	for _, a := range m.retired {
		delete(m.drop, a)
	}
	m.retired = nil
}
