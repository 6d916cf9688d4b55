package importer

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

// live indexes one vhost's current topology by name.
type live struct {
	vhost     string
	release   topology.Version
	t         topology.Topology
	queues    map[string]topology.Queue
	exchanges map[string]topology.Exchange
	bindings  map[topology.Address]topology.Binding
	policies  map[string]topology.Policy
	// bySource holds the bindings of each source exchange.
	bySource map[string][]topology.Binding
	// byDest holds the bindings into each queue.
	byDest map[string][]topology.Binding
	// outboxDelays holds the delays of each queue's outbox delay queues.
	outboxDelays map[string][]time.Duration
	// springs caches the spring layout found behind each return exchange.
	springs map[string]springLayout
	// waitQueueType is the type of the vhost's shared wait queues.
	waitQueueType string
	// ladder is the vhost's delay ladder, nil for none; the model sets it
	// to nil when a spec with it would not reproduce the vhost.
	ladder *ladder
	// returns holds, for each queue, the hand-made TTL queues that
	// dead-letter back into it (handmade.go).
	returns map[string][]string
	// retiredBy is the work queue that retires each hand-made TTL queue.
	retiredBy map[string]string
}

func index(t topology.Topology, vhost string, release topology.Version) *live {
	l := &live{vhost: vhost, queues: map[string]topology.Queue{}, exchanges: map[string]topology.Exchange{},
		bindings: map[topology.Address]topology.Binding{}, policies: map[string]topology.Policy{},
		bySource: map[string][]topology.Binding{}, byDest: map[string][]topology.Binding{},
		outboxDelays: map[string][]time.Duration{}, springs: map[string]springLayout{}, release: release}
	l.t.Vhosts = []string{vhost}
	for _, e := range t.Exchanges {
		if e.Vhost == vhost {
			l.exchanges[e.Name] = e
			l.t.Exchanges = append(l.t.Exchanges, e)
		}
	}
	for _, q := range t.Queues {
		if q.Vhost == vhost {
			l.queues[q.Name] = q
			l.t.Queues = append(l.t.Queues, q)
		}
	}
	for _, b := range t.Bindings {
		if b.Vhost == vhost {
			l.bindings[b.Addr()] = b
			l.t.Bindings = append(l.t.Bindings, b)
		}
	}
	for _, p := range t.Policies {
		if p.Vhost == vhost {
			l.policies[p.Name] = p
			l.t.Policies = append(l.t.Policies, p)
		}
	}
	l.t.Sort()
	for _, b := range l.t.Bindings {
		l.bySource[b.Source] = append(l.bySource[b.Source], b)
		if b.DestinationType == topology.DestQueue {
			l.byDest[b.Destination] = append(l.byDest[b.Destination], b)
		}
	}
	for _, q := range l.t.Queues {
		w, ok := contract.ParseWaitQueue(q.Name)
		if ok && w.Layout == contract.WaitOutbox {
			l.outboxDelays[w.Queue] = append(l.outboxDelays[w.Queue], w.Delay)
		}
	}
	l.waitQueueType = l.sharedWaitQueueType()
	l.ladder = l.findLadder()
	l.findReturns()
	return l
}

// sharedWaitQueueType is the type of the first vhost-wide wait queue
// (shared layout or delay ladder), quorum when there is none: the spec's
// wait_queue_type is one value for all of them. Spring wait queues are
// classic whatever it says, as the library declares them.
func (l *live) sharedWaitQueueType() string {
	for _, q := range l.t.Queues {
		if w, ok := contract.ParseWaitQueue(q.Name); ok && (w.Layout == contract.WaitShared || w.Layout == contract.WaitLevels) {
			return q.QueueType()
		}
	}
	return spec.TypeQuorum
}

// candidate is a work queue with the retry topology a recogniser guessed,
// and, once verified, the objects that topology generates.
type candidate struct {
	q    spec.Queue
	what string // for the comment: "rmqtopo retry topology" or "goqueue preset"
	note string // an extra comment line, e.g. where delays were guessed
	// generated holds every object the candidate's expansion declares
	// beside its work queue; for an adopted hand-made scheme, the live
	// objects it takes over instead (its DLQ, the queues it retires).
	generated map[topology.Address]bool
	// adopt marks a hand-made retry scheme (handmade.go): the spec
	// changes the vhost rather than reproduce it.
	adopt bool
}

// recognisers guess, from names alone, which retry topology a queue may
// have; verify decides. Order matters only for levels before native: a
// levels queue also holds everything native guesses for it (its retry
// exchange and immediate retries, without the delayed ones); the others
// need their own generated objects to exist.
var recognisers = []func(*live, topology.Queue) *candidate{nativeLayout, levels, native, goqueue, outbox, spring, handMade}

// recognise returns the first candidate for q whose expansion the live
// topology holds exactly, or nil and why none is: what the first guess
// lacks, or that nothing was guessed.
func (l *live) recognise(q topology.Queue) (*candidate, string) {
	if t := q.QueueType(); t != spec.TypeClassic && t != spec.TypeQuorum || !q.Durable || q.AutoDelete {
		return nil, "it is not a durable classic or quorum queue"
	}
	why := "nothing around it is a retry topology rmqtopo knows"
	if _, ok := l.exchanges[contract.RetryExchange(q.Name)]; ok {
		why = fmt.Sprintf("it has the retry exchange %q, but what that routes to is no retry layout rmqtopo knows (a wait queue missing, say)",
			contract.RetryExchange(q.Name))
	}
	guessed := false
	for _, r := range recognisers {
		c := r(l, q)
		if c == nil {
			continue
		}
		if c.adopt {
			return c, "" // nothing to verify: the spec changes the vhost
		}
		miss := l.verify(c, q)
		if miss == "" {
			return c, ""
		}
		if !guessed {
			why, guessed = "it looks like "+c.what+", but "+miss, true
		}
	}
	return nil, why
}

// base guesses what every kind of work queue has: its type, the
// attributes the spec has keys for, which rmqtopo keeps in the queue's
// own policy, its DLQ and its parking lot.
func (l *live) base(q topology.Queue) spec.Queue {
	sq := spec.Queue{Name: q.Name, Type: q.QueueType()}
	def := l.policies[contract.QueuePolicy(q.Name)].Definition
	if n, ok := def["delivery-limit"].(int64); ok && sq.Type == spec.TypeQuorum && n != spec.DefaultDeliveryLimit && n >= 1 {
		sq.DeliveryLimit = int(n)
	}
	if n, ok := def["message-ttl"].(int64); ok && n > 0 {
		sq.MessageTTL = time.Duration(n) * time.Millisecond
	}
	if n, ok := def["max-length"].(int64); ok && n >= 1 {
		sq.MaxLength = n
	}
	_, sq.DLQ = l.queues[contract.DeadLetterQueue(q.Name)]
	_, sq.ParkingLot = l.queues[contract.ParkingLotQueue(q.Name)]
	return sq
}

// withReturnQueue is base for rmqtopo's own layouts, which may have a
// return queue (presets may not): verify decides whether it is one.
func (l *live) withReturnQueue(q topology.Queue) spec.Queue {
	sq := l.base(q)
	l.namedDLQ(&sq)
	_, sq.ReturnQueue = l.queues[contract.ReturnQueue(q.Name)]
	return sq
}

// namedDLQ finds, for rmqtopo's own layouts, a DLQ under another name
// (dlq_name): the one queue the fanout Q.dlx feeds, when Q.dlq is not
// there. Verify decides whether it is one.
func (l *live) namedDLQ(sq *spec.Queue) {
	if sq.DLQ {
		return
	}
	var to []string
	for _, b := range l.bySource[contract.DeadLetterExchange(sq.Name)] {
		if b.DestinationType == topology.DestQueue {
			to = append(to, b.Destination)
		}
	}
	if len(to) == 1 {
		sq.DLQ, sq.DLQName = true, to[0]
	}
}

// ttl is the TTL a wait queue is declared with (its x-message-ttl).
func (l *live) ttl(queue string) (time.Duration, bool) {
	q, ok := l.queues[queue]
	if !ok {
		return 0, false
	}
	return positiveMillis(q.Arguments["x-message-ttl"])
}

// policyTTL is the TTL rmqtopo's policy of a queue gives it.
func (l *live) policyTTL(queue string) (time.Duration, bool) {
	p, ok := l.policies[contract.QueuePolicy(queue)]
	if !ok {
		return 0, false
	}
	return positiveMillis(p.Definition["message-ttl"])
}

func positiveMillis(v any) (time.Duration, bool) {
	n, ok := v.(int64)
	return time.Duration(n) * time.Millisecond, ok && n > 0
}

// native recognises rmqtopo's own layouts: the retry exchange Q.retry
// routes retry n (attempt header n+1) back to Q (immediate) or to a wait
// queue whose TTL is the delay.
func native(l *live, q topology.Queue) *candidate {
	retry := contract.RetryExchange(q.Name)
	if _, ok := l.exchanges[retry]; !ok {
		return nil
	}
	dest := map[int]string{}
	for _, b := range l.bySource[retry] {
		if n, ok := attemptOf(b); ok && b.DestinationType == topology.DestQueue {
			dest[n] = b.Destination
		}
	}
	sq := l.withReturnQueue(q)
	var delays []time.Duration
	for k := 1; k <= len(dest); k++ {
		d, ok := dest[k]
		switch {
		case !ok:
			return nil
		case d == q.Name && len(delays) == 0:
			sq.ImmediateRetries++
			continue
		}
		ttl, ok := l.ttl(d)
		if !ok {
			return nil
		}
		if len(delays) == 0 && !strings.HasPrefix(d, contract.SharedWaitQueuePrefix) {
			sq.Layout = spec.LayoutPerAttempt
		}
		delays = append(delays, ttl)
	}
	sq.Retry = policyFor(delays)
	return &candidate{q: sq, what: "rmqtopo retry topology"}
}

// nativeLayout recognises the native layout (contract.Native) by the
// schedule in the queue's own arguments (the shape of earlier rmqtopo) or
// in its binding from the schedule exchange (the in-place shape): leading
// zero delays are immediate retries, the rest its retry policy.
func nativeLayout(l *live, q topology.Queue) *candidate {
	n, err := contract.NativeOf(q.Arguments, l.schedule(q.Name))
	if err != nil {
		return nil
	}
	sq := l.base(q)
	l.namedDLQ(&sq)
	sq.Layout, sq.DeliveryLimit = spec.LayoutNative, 0
	delays := n.Delays
	for len(delays) > 0 && delays[0] == 0 {
		sq.ImmediateRetries++
		delays = delays[1:]
	}
	sq.Retry = policyFor(delays)
	if n.Jitter {
		if sq.Retry.Kind == "delays" {
			return nil // a list of delays takes no jitter
		}
		sq.Retry.Jitter = spec.JitterFull
	}
	return &candidate{q: sq, what: "rmqtopo native layout"}
}

// schedule is the arguments of queue's binding from the schedule
// exchange, nil if it has none.
func (l *live) schedule(queue string) topology.Args {
	for _, b := range l.byDest[queue] {
		if b.Source == contract.ScheduleExchange && b.RoutingKey == queue {
			return b.Arguments
		}
	}
	return nil
}

// goqueue recognises the goqueue preset by its retry exchange. The
// service sets each retry's delay as a per-message expiration; the delay
// the spec gives is the TTL of rmqtopo's policy on the retry queue, which
// caps it.
func goqueue(l *live, q topology.Queue) *candidate {
	if _, ok := l.exchanges[contract.GoQueueRetryExchange(q.Name)]; !ok {
		return nil
	}
	sq := l.base(q)
	sq.Preset = spec.PresetGoQueue
	var delays []time.Duration
	for n := 1; ; n++ {
		name := contract.GoQueueRetryQueue(q.Name, n)
		if _, ok := l.queues[name]; !ok {
			break
		}
		d, ok := l.policyTTL(name)
		if !ok {
			return nil
		}
		delays = append(delays, d)
	}
	sq.Retry = policyFor(delays)
	return &candidate{q: sq, what: "goqueue preset"}
}

// outbox recognises the outbox preset by its delay queues Q.delay_{d}s.
func outbox(l *live, q topology.Queue) *candidate {
	delays := append([]time.Duration(nil), l.outboxDelays[q.Name]...)
	if len(delays) == 0 {
		return nil
	}
	sortDurations(delays)
	sq := l.base(q)
	sq.Preset = spec.PresetOutbox
	sq.Retry = policyFor(delays)
	return &candidate{q: sq, what: "outbox preset"}
}

// verify expands the candidate on its own and accepts it when the live
// topology holds every object of the expansion exactly; else it says what
// differs. Arguments of the work queue that the expansion does not write
// become the candidate's arguments.
func (l *live) verify(c *candidate, q topology.Queue) string {
	g := l.expand(c.q)
	wq, ok := g.Queue(l.vhost, q.Name)
	if !ok {
		return "its expansion has no work queue"
	}
	// GoQueue declares the work queue with the service's arguments, which
	// its preset_options name.
	extra := &c.q.Arguments
	if c.q.Preset == spec.PresetGoQueue {
		extra = &c.q.PresetOptions.QueueArguments
	}
	for k, v := range q.Arguments {
		if _, ok := wq.Arguments[k]; !ok {
			if *extra == nil {
				*extra = map[string]any{}
			}
			(*extra)[k] = v
		}
	}
	if *extra != nil {
		g = l.expand(c.q)
	}
	gen, miss := l.holds(g)
	delete(gen, q.Addr())
	c.generated = gen
	return miss
}

// holds reports whether the vhost holds every object of g exactly,
// rmqtopo's policies included, and returns their addresses; when it does
// not, it says which object it lacks or holds otherwise.
func (l *live) holds(g topology.Topology) (map[topology.Address]bool, string) {
	out := map[topology.Address]bool{}
	differs := func(a topology.Address, found bool) (map[topology.Address]bool, string) {
		if !found {
			return nil, "the vhost has no " + a.String()
		}
		return nil, a.String() + " is not as it would declare it"
	}
	for _, e := range g.Exchanges {
		le, ok := l.exchanges[e.Name]
		if !ok && contract.IsLevelsMarker(e.Name) {
			continue // applied before levels queues had a marker; the next apply adds it
		}
		if !reflect.DeepEqual(le, e) {
			return differs(e.Addr(), ok)
		}
		out[e.Addr()] = true
	}
	for _, gq := range g.Queues {
		if lq, ok := l.queues[gq.Name]; !reflect.DeepEqual(lq, gq) {
			return differs(gq.Addr(), ok)
		}
		out[gq.Addr()] = true
	}
	for _, b := range g.Bindings {
		if _, ok := l.bindings[b.Addr()]; !ok {
			return differs(b.Addr(), false)
		}
		out[b.Addr()] = true
	}
	for _, p := range g.Policies {
		if lp, ok := l.policies[p.Name]; !ok || !reflect.DeepEqual(lp, p) {
			return differs(p.Addr(), ok)
		}
		out[p.Addr()] = true
	}
	return out, ""
}

// expand is the topology one queue of the vhost generates, with the
// vhost's wait queue type, and its ladder for a levels queue.
func (l *live) expand(q spec.Queue) topology.Topology {
	s := spec.Spec{Version: spec.Version, Vhost: l.vhost, WaitQueueType: l.specWaitQueueType(), Queues: []spec.Queue{q}}
	if q.Layout == spec.LayoutLevels && l.ladder != nil {
		s.Levels = &l.ladder.levels
	}
	g := spec.ExpandFor(l.release, &spec.File{Spec: s})
	// The queues are compared as a plan compares them: the release's
	// default arguments are the same queue declared or not.
	g = plan.WithDefaults(l.t, g, l.release)
	if wq, ok := l.queues[q.Name]; ok {
		// A queue an earlier rmqtopo made keeps its dead-lettering in its
		// policy, as a plan keeps it.
		g = plan.KeepLegacy(topology.Topology{Queues: []topology.Queue{wq}}, g, l.release)
	}
	return g
}

// specWaitQueueType is the spec's wait_queue_type for the vhost's type.
func (l *live) specWaitQueueType() string {
	if l.waitQueueType != spec.TypeQuorum {
		return l.waitQueueType
	}
	return ""
}

func sortDurations(ds []time.Duration) {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
}
