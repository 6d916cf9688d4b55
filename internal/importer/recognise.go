package importer

import (
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

// live indexes one vhost's current topology by name.
type live struct {
	vhost     string
	t         topology.Topology
	queues    map[string]topology.Queue
	exchanges map[string]topology.Exchange
	bindings  map[topology.Address]topology.Binding
	// bySource holds the bindings of each source exchange.
	bySource map[string][]topology.Binding
	// outboxDelays holds the delays of each queue's outbox delay queues;
	// springDelays those of the vhost's spring wait queues.
	outboxDelays map[string][]time.Duration
	springDelays []time.Duration
	// waitQueueType is the type of the vhost's shared wait queues.
	waitQueueType string
	// ladder is the vhost's delay ladder, nil for none; the model sets it
	// to nil when a spec with it would not reproduce the vhost.
	ladder *ladder
}

func index(t topology.Topology, vhost string) *live {
	l := &live{vhost: vhost, queues: map[string]topology.Queue{}, exchanges: map[string]topology.Exchange{},
		bindings: map[topology.Address]topology.Binding{}, bySource: map[string][]topology.Binding{},
		outboxDelays: map[string][]time.Duration{}}
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
			l.t.Policies = append(l.t.Policies, p)
		}
	}
	l.t.Sort()
	for _, b := range l.t.Bindings {
		l.bySource[b.Source] = append(l.bySource[b.Source], b)
	}
	for _, q := range l.t.Queues {
		w, ok := contract.ParseWaitQueue(q.Name)
		switch {
		case !ok:
		case w.Layout == contract.WaitOutbox:
			l.outboxDelays[w.Queue] = append(l.outboxDelays[w.Queue], w.Delay)
		case w.Layout == contract.WaitSpring && w.Delay > 0:
			l.springDelays = append(l.springDelays, w.Delay)
		}
	}
	sortDurations(l.springDelays)
	l.waitQueueType = l.sharedWaitQueueType()
	l.ladder = l.findLadder()
	return l
}

// sharedWaitQueueType is the type of the first vhost-wide wait queue
// (shared layout, spring preset or delay ladder), quorum when there is
// none: the spec's wait_queue_type is one value for all of them.
func (l *live) sharedWaitQueueType() string {
	for _, q := range l.t.Queues {
		if w, ok := contract.ParseWaitQueue(q.Name); ok && (w.Layout == contract.WaitShared || w.Layout == contract.WaitSpring || w.Layout == contract.WaitLevels) {
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
	// beside its work queue.
	generated map[topology.Address]bool
}

// recognisers guess, from names alone, which retry topology a queue may
// have; verify decides. Order matters only for levels before native: a
// levels queue also holds everything native guesses for it (its retry
// exchange and immediate retries, without the delayed ones); the others
// need their own generated objects to exist.
var recognisers = []func(*live, topology.Queue) *candidate{levels, native, goqueue, outbox, spring}

// recognise returns the first candidate for q whose expansion the live
// topology holds exactly, or nil.
func (l *live) recognise(q topology.Queue) *candidate {
	if t := q.QueueType(); t != spec.TypeClassic && t != spec.TypeQuorum || !q.Durable || q.AutoDelete {
		return nil
	}
	for _, r := range recognisers {
		if c := r(l, q); c != nil && l.verify(c, q) {
			return c
		}
	}
	return nil
}

// base guesses what every kind of work queue has: its type and the
// arguments the spec has keys for, its DLQ and its parking lot.
func (l *live) base(q topology.Queue) spec.Queue {
	sq := spec.Queue{Name: q.Name, Type: q.QueueType()}
	a := q.Arguments
	if n, ok := a["x-delivery-limit"].(int64); ok && sq.Type == spec.TypeQuorum && n != spec.DefaultDeliveryLimit && n >= 1 {
		sq.DeliveryLimit = int(n)
	}
	if n, ok := a["x-message-ttl"].(int64); ok && n > 0 {
		sq.MessageTTL = time.Duration(n) * time.Millisecond
	}
	if n, ok := a["x-max-length"].(int64); ok && n >= 1 {
		sq.MaxLength = n
	}
	_, sq.DLQ = l.queues[contract.DeadLetterQueue(q.Name)]
	_, sq.ParkingLot = l.queues[contract.ParkingLotQueue(q.Name)]
	return sq
}

func (l *live) ttl(queue string) (time.Duration, bool) {
	q, ok := l.queues[queue]
	if !ok {
		return 0, false
	}
	n, ok := q.Arguments["x-message-ttl"].(int64)
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
	sq := l.base(q)
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

// goqueue recognises the goqueue preset by its retry exchange; its retry
// queues carry no TTL (the service sets a per-message expiration), so the
// delays are placeholders unless a retry queue has one.
func goqueue(l *live, q topology.Queue) *candidate {
	if _, ok := l.exchanges[q.Name+"__retry_exchange"]; !ok {
		return nil
	}
	sq := l.base(q)
	sq.Preset = spec.PresetGoQueue
	var delays []time.Duration
	guessed := false
	for n := 1; ; n++ {
		name := q.Name + "__retry." + itoa(n)
		if _, ok := l.queues[name]; !ok {
			break
		}
		d, ok := l.ttl(name)
		if !ok {
			d, guessed = time.Second, true
		}
		delays = append(delays, d)
	}
	sq.Retry = policyFor(delays)
	c := &candidate{q: sq, what: "goqueue preset"}
	if guessed {
		c.note = "its delays live in the service (a per-message expiration), not in the\nbroker: these are placeholders that only size the chain"
	}
	return c
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

// spring recognises the spring preset by the return exchange's binding to
// Q. Its wait queues are shared by every spring queue of the vhost, so the
// broker cannot tell which delays are Q's: each spring queue gets them all.
func spring(l *live, q topology.Queue) *candidate {
	found := false
	for _, b := range l.bySource["return"] {
		if b.Destination == q.Name && b.DestinationType == topology.DestQueue && b.Arguments["return-to"] == q.Name {
			found = true
		}
	}
	if !found {
		return nil
	}
	delays := append([]time.Duration(nil), l.springDelays...)
	sq := l.base(q)
	sq.Preset = spec.PresetSpring
	sq.Retry = policyFor(delays)
	return &candidate{q: sq, what: "spring preset",
		note: "its wait queues are shared by the vhost's spring queues and the broker\ndoes not say which delays are this queue's, so it gets them all"}
}

// verify expands the candidate on its own and accepts it when the live
// topology holds every object of the expansion exactly. Arguments of the
// work queue that the expansion does not write become the candidate's
// arguments.
func (l *live) verify(c *candidate, q topology.Queue) bool {
	g := l.expand(c.q)
	wq, ok := g.Queue(l.vhost, q.Name)
	if !ok {
		return false
	}
	for k, v := range q.Arguments {
		if _, ok := wq.Arguments[k]; !ok {
			if c.q.Arguments == nil {
				c.q.Arguments = map[string]any{}
			}
			c.q.Arguments[k] = v
		}
	}
	if c.q.Arguments != nil {
		g = l.expand(c.q)
	}
	gen, ok := l.holds(g)
	delete(gen, q.Addr())
	c.generated = gen
	return ok
}

// holds reports whether the vhost holds every object of g exactly, and
// returns their addresses.
func (l *live) holds(g topology.Topology) (map[topology.Address]bool, bool) {
	out := map[topology.Address]bool{}
	for _, e := range g.Exchanges {
		if !reflect.DeepEqual(l.exchanges[e.Name], e) {
			return nil, false
		}
		out[e.Addr()] = true
	}
	for _, gq := range g.Queues {
		if !reflect.DeepEqual(l.queues[gq.Name], gq) {
			return nil, false
		}
		out[gq.Addr()] = true
	}
	for _, b := range g.Bindings {
		if _, ok := l.bindings[b.Addr()]; !ok {
			return nil, false
		}
		out[b.Addr()] = true
	}
	return out, true
}

// expand is the topology one queue of the vhost generates, with the
// vhost's wait queue type, and its ladder for a levels queue.
func (l *live) expand(q spec.Queue) topology.Topology {
	s := spec.Spec{Version: spec.Version, Vhost: l.vhost, WaitQueueType: l.specWaitQueueType(), Queues: []spec.Queue{q}}
	if q.Layout == spec.LayoutLevels && l.ladder != nil {
		s.Levels = &l.ladder.levels
	}
	return spec.Expand(&spec.File{Spec: s})
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
