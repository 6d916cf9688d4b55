package spec

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/rabbitmq"
	"github.com/rmqtopo/rmqtopo/topology"
)

// nativeLayout builds a queue of the native layout (contract's
// inplace.go): its DLQ and parking lot as any queue's, no retry exchange
// and no wait queue. In the in-place shapes (nativeShapeOf) the work
// queue's arguments only mark it native (contract.NativeMarker), with its
// number of retries in the binding shape; its schedule is, for the
// helper, in its binding from the vhost's schedule exchange
// (contract.ScheduleArguments) and, for the broker in the policy shape,
// in its own policy (contract.SchedulePolicy: its delivery limit and the
// broker's linear delays): a schedule change is a binding replaced (and a
// policy updated), no queue replaced.
func (b *builder) nativeLayout(q Queue) {
	b.checkNative(q)
	if q.DLQ {
		dlx := contract.DeadLetterExchange(q.Name)
		b.addExchange(topology.Exchange{Name: dlx, Type: "fanout", Durable: true}, b.generated(q, "dead-letter exchange"))
		b.bind(dlx, topology.DestQueue, DLQOf(q), "", nil)
	}
	b.deadEnds(q)
	shape := nativeShapeOf(q)
	if shape == shapeArguments {
		b.nativeInArguments(q)
		return
	}
	delays, jitter := NativeDelays(q), q.Retry.Jitter == JitterFull
	def := setAttributes(q)
	if shape == shapePolicy {
		maps.Copy(def, contract.SchedulePolicy(delays, jitter))
	}
	b.queuePolicy(q.Name, def)
	b.addExchange(topology.Exchange{Name: contract.ScheduleExchange, Type: "direct", Durable: true},
		b.sharedOrigin(q, "schedule exchange of the native layout"))
	b.bind(contract.ScheduleExchange, topology.DestQueue, q.Name, q.Name, contract.ScheduleArguments(delays, jitter))
	wq, ok := b.queue(q.Name)
	if !ok {
		return
	}
	args := maps.Clone(wq.Arguments)
	// In the policy shape any delivery limit argument would cap the
	// policy's (the lower wins): the queue has none.
	delete(args, contract.ArgDeliveryLimit)
	marker := contract.NativeMarker()
	if shape == shapeBinding {
		marker = contract.NativeMarkerWithLimit(len(delays))
	}
	maps.Copy(args, marker)
	wq.Arguments = topology.NormalizeArgs(args)
}

// nativeShape is where a native queue keeps its schedule.
type nativeShape int

const (
	// shapeArguments: all of it in the queue's arguments
	// (contract.NativeArguments); a schedule change replaces the queue.
	shapeArguments nativeShape = iota
	// shapePolicy: the broker's part in the queue's own policy, the
	// helper's in its schedule binding; every schedule change is in place.
	shapePolicy
	// shapeBinding: the modified route without a policy, its number of
	// retries in its arguments and its delays in its schedule binding; a
	// schedule change that keeps the number of retries is in place.
	shapeBinding
)

// nativeShapeOf returns the shape q's native queue takes: the one it has
// where it is live (Resolve), else freshShape.
func nativeShapeOf(q Queue) nativeShape {
	if q.res.set {
		return q.res.shape
	}
	return freshShape(q)
}

// freshShape is the shape of a native queue not live yet. The policy
// shape needs a policy of the queue's own, which RabbitMQ matches against
// every queue of the vhost on each write (spec/policies.go): 1,000 new
// native queues with one each made the management API stop answering
// within 30 s on 4.3.6 (BenchmarkPolicyScale, quorum/native,
// docs/benchmarks.md), where the arguments shape applied like the
// arguments baseline. One policy per distinct schedule instead
// (quorum/native-shared) changed a schedule in under 1 s at 1,000 queues,
// but RabbitMQ 4.3.6 refuses a pattern over 1,024 bytes, so it takes a
// policy per ~60 names, whose matching made the apply from empty about
// 1.5 times the baseline, and each later policy write at 5,000 queues 2-3
// times dearer: still the square of the queue count. So a queue takes the
// policy shape when it has that policy anyway (its spec sets message_ttl
// or max_length); one on the modified route, whose delays the broker does
// not compute, needs no policy (the binding shape); one on the reject
// route keeps the broker's schedule in its arguments, and changes it by a
// replace (a migration with migrate: true), which keeps every message it
// holds.
func freshShape(q Queue) nativeShape {
	switch {
	case len(setAttributes(q)) > 0:
		return shapePolicy
	case brokerRoute(q) == contract.RouteModified:
		return shapeBinding
	}
	return shapeArguments
}

// brokerRoute is the route q's schedule takes where the shape does not
// decide it: reject where the broker can compute the delays, unjittered.
func brokerRoute(q Queue) contract.SettleRoute {
	if _, _, ok := contract.BrokerExpressible(NativeDelays(q)); ok && q.Retry.Jitter != JitterFull {
		return contract.RouteReject
	}
	return contract.RouteModified
}

// NativeRoute is how a service retries a delivery of q on the native
// layout: brokerRoute, but always the modified route in the binding
// shape, where no policy gives the broker a delay of its own.
func NativeRoute(q Queue) contract.SettleRoute {
	if nativeShapeOf(q) == shapeBinding {
		return contract.RouteModified
	}
	return brokerRoute(q)
}

// nativeInArguments builds the native queue q of the arguments shape:
// its schedule and delivery limit in its own arguments
// (contract.NativeArguments), its attributes in a policy if it sets any.
func (b *builder) nativeInArguments(q Queue) {
	b.queuePolicy(q.Name, setAttributes(q))
	wq, ok := b.queue(q.Name)
	if !ok {
		return
	}
	args := maps.Clone(wq.Arguments)
	maps.Copy(args, contract.NativeArguments(NativeDelays(q), q.Retry.Jitter == JitterFull))
	wq.Arguments = topology.NormalizeArgs(args)
}

// NativeDelays is the delay of each retry of q on the native layout: 0
// for each immediate retry, then the schedule's delays.
func NativeDelays(q Queue) []time.Duration {
	return append(make([]time.Duration, q.ImmediateRetries), q.Retry.Delays()...)
}

// checkNative reports what the native layout cannot do for q.
func (b *builder) checkNative(q Queue) {
	at := q.layoutAt
	if at == (pos{}) {
		at = q.nameAt
	}
	switch {
	case q.Type != TypeQuorum:
		b.errorf(at, "layout native needs a quorum queue: RabbitMQ 4.3 delays retries only inside quorum queues (queue %q is %s)", q.Name, q.Type)
	case q.ImmediateRetries+q.Retry.count() == 0:
		b.errorf(at, "layout native needs retries: queue %q has no retry schedule", q.Name)
	}
	if q.DeliveryLimit != 0 {
		b.errorf(q.deliveryLimitAt, "delivery_limit does not apply to layout native: the queue's delivery limit is the number of its retries (%d)", q.ImmediateRetries+q.Retry.count())
	}
	if at, ok := q.set.get(keyReturnQueue); ok && q.ReturnQueue {
		b.errorf(at, "return_queue does not apply to layout native: the broker brings a delayed retry back ahead of the queue's backlog itself")
	}
}

// Target is what decides the layout auto gives each queue: the RabbitMQ
// version the plan is judged for and what is live on the broker.
type Target struct {
	// RabbitMQ is the judged version; unknown never gives native.
	RabbitMQ topology.Version
	// Live is the broker's topology; nil when nothing is live (render,
	// plan --against empty).
	Live *topology.Topology
}

// Kept is a live queue that keeps its layout where auto would give a new
// queue another: the plan says how to move it.
type Kept struct {
	Vhost, Queue string
	// Live is the layout the queue has; ReturnQueue whether it has a
	// return queue.
	Live        Layout
	ReturnQueue bool
	// Auto is what auto gives a queue that is not live yet.
	Auto Layout
	// Conflict, when not empty, says what the spec asks that the live
	// layout kept cannot do (a delivery_limit or return queue on a native
	// queue): written out, the same layout refuses it at validation; kept
	// by auto, the plan refuses it before any write, so that it never
	// plans a key the broker would override.
	Conflict string
}

// Resolve chooses, for every queue of files whose layout is auto (written
// or by default), the layout Expand builds for target t, and the return
// queue of a queue that does not say: a queue not live yet gets native
// where t's release can delay retries itself (its profile's
// NativeDelayedRetry), else shared (levels
// for a jittered schedule, which fixed-TTL wait queues cannot draw) with
// a return queue (on time behind a backlog); a live queue keeps the layout
// and return queue it has. An explicit layout or return_queue always
// wins. It records the choice in files (Expand, Schedule and ReturnTo
// follow it) and returns the live queues that keep a layout auto would
// not give them. Calling it again replaces the earlier choice.
func Resolve(files []*File, t Target) []Kept {
	profile := rabbitmq.ProfileFor(t.RabbitMQ)
	native := judged{native: profile.NativeDelayedRetry(), priorities: profile.QuorumPriorities()}
	live := indexLive(t.Live)
	var kept []Kept
	for _, f := range files {
		s := &f.Spec
		for i := range s.Queues {
			q := &s.Queues[i]
			q.res = resolution{}
			if q.Raw || q.Preset != PresetNone {
				continue
			}
			q.res = s.resolve(*q, native, live)
			if k, ok := keptFor(s, *q, native, live); ok {
				kept = append(kept, k)
			}
		}
	}
	return kept
}

// judged is what the judged release offers a queue that is not live yet.
type judged struct {
	// native: the native layout (contract.NativeSince).
	native bool
	// priorities: a quorum queue delivers a retry published at
	// contract.RetryPriority ahead of its backlog
	// (rabbitmq.Profile.QuorumPriorities), so it needs no return queue.
	priorities bool
}

// resolution is what Resolve chose for one queue.
type resolution struct {
	set         bool
	layout      Layout
	returnQueue bool
	// priorities: q's retries come back ahead of its backlog by their
	// message priority (a quorum queue on a release that has them).
	priorities bool
	// shape is the native layout's shape (see nativeShapeOf): a live
	// queue keeps the one it has.
	shape nativeShape
}

func (s *Spec) resolve(q Queue, j judged, live liveIndex) resolution {
	_, returnSet := q.set.get(keyReturnQueue)
	r := resolution{set: true, layout: s.writtenLayout(q), returnQueue: q.ReturnQueue, priorities: j.priorities && q.Type == TypeQuorum}
	shape, isLive := live.shape(s.Vhost, q.Name)
	if r.layout == LayoutAuto {
		switch {
		case isLive:
			r.layout = shape.layout
		case j.native && nativeFits(q, returnSet):
			r.layout = LayoutNative
		case q.Retry.Jitter == JitterFull:
			// The one wait-queue layout that can draw a delay.
			r.layout = LayoutLevels
		default:
			r.layout = LayoutShared
		}
	}
	if !returnSet && r.layout != LayoutNative {
		// A new queue gets one where priorities cannot bring a retry
		// ahead of the backlog; a live one keeps what it has, as a
		// return queue removed would strand the retries on their way
		// to it (keptFor explains).
		r.returnQueue = shape.returnQueue || (!isLive && !r.priorities)
	}
	if r.layout == LayoutNative && !returnSet {
		r.returnQueue = false
	}
	r.shape = freshShape(q)
	if isLive && shape.layout == LayoutNative {
		r.shape = shape.native
	}
	return r
}

// nativeFits reports whether auto may make q native: a quorum queue with
// retries, whose spec asks for nothing the native layout cannot do (a
// delivery limit of its own, a return queue).
func nativeFits(q Queue, returnSet bool) bool {
	return q.Type == TypeQuorum && q.ImmediateRetries+q.Retry.count() > 0 && q.DeliveryLimit == 0 && !(returnSet && q.ReturnQueue)
}

// keptFor reports q when it is live in a shape auto would not give it
// new.
func keptFor(s *Spec, q Queue, native judged, live liveIndex) (Kept, bool) {
	shape, isLive := live.shape(s.Vhost, q.Name)
	if !isLive || s.writtenLayout(q) != LayoutAuto {
		return Kept{}, false
	}
	fresh := s.resolve(q, native, liveIndex{})
	if fresh.layout == q.res.layout && fresh.returnQueue == q.res.returnQueue {
		return Kept{}, false
	}
	k := Kept{Vhost: s.Vhost, Queue: q.Name, Live: shape.layout, ReturnQueue: q.res.returnQueue, Auto: fresh.layout}
	if shape.layout == LayoutNative {
		k.Conflict = nativeConflict(q)
	}
	return k, true
}

// nativeConflict says what q's spec asks that a live native queue, which
// auto keeps native, cannot do; empty when nothing. It is checkNative's
// rule for a layout written out, worded for a layout kept.
func nativeConflict(q Queue) string {
	_, returnSet := q.set.get(keyReturnQueue)
	move := "or set layout: shared and migrate: true to move the queue to a layout that has it"
	switch {
	case q.DeliveryLimit != 0:
		return fmt.Sprintf("queue %q keeps its live layout native, where delivery_limit does not apply: the broker's delivery limit of a native queue is the number of its retries (%d), which its schedule sets; remove delivery_limit, %s",
			q.Name, q.ImmediateRetries+q.Retry.count(), move)
	case returnSet && q.ReturnQueue:
		return fmt.Sprintf("queue %q keeps its live layout native, where return_queue does not apply: the broker brings a delayed retry back ahead of the queue's backlog itself; remove return_queue, %s", q.Name, move)
	}
	return ""
}

// liveShape is the layout a live work queue has.
type liveShape struct {
	layout      Layout
	returnQueue bool
	native      nativeShape // the shape of a native queue
}

// liveIndex finds the layout of a live queue by vhost and name.
type liveIndex map[topology.Address]liveShape

// shape returns the live shape of queue name, and whether it is live.
func (l liveIndex) shape(vhost, name string) (liveShape, bool) {
	s, ok := l[topology.Address{Kind: topology.KindQueue, Vhost: vhost, Name: name}]
	return s, ok
}

// indexLive reads the layout of every live queue from what rmqtopo built
// for it: native arguments, a ladder's delivery binding, per-attempt wait
// queues bound to its retry exchange, else shared; and its return queue.
func indexLive(t *topology.Topology) liveIndex {
	out := liveIndex{}
	if t == nil {
		return out
	}
	for _, q := range t.Queues {
		s := liveShape{layout: LayoutShared}
		if _, err := contract.ParseNative(q.Arguments); !errors.Is(err, contract.ErrNotNative) {
			s.layout = LayoutNative
		}
		s.native = liveNativeShape(q.Arguments)
		out[q.Addr()] = s
	}
	for _, q := range t.Queues {
		if w, ok := contract.ParseWaitQueue(q.Name); ok && w.Layout == contract.WaitPerAttempt {
			// By its name alone, for a source of queues without bindings.
			name, _ := strings.CutSuffix(w.Queue, contract.ReturnQueue(""))
			a := topology.Address{Kind: topology.KindQueue, Vhost: q.Vhost, Name: name}
			if s, live := out[a]; live && s.layout == LayoutShared {
				s.layout = LayoutPerAttempt
				out[a] = s
			}
		}
		if owner, ok := returnQueueOwner(q.Name); ok {
			a := topology.Address{Kind: topology.KindQueue, Vhost: q.Vhost, Name: owner}
			if s, live := out[a]; live {
				s.returnQueue = true
				out[a] = s
			}
		}
	}
	for _, bd := range t.Bindings {
		name, layout := "", Layout("")
		if w, ok := contract.ParseWaitQueue(bd.Destination); ok && w.Layout == contract.WaitPerAttempt && bd.DestinationType == topology.DestQueue {
			name, layout = w.Queue, LayoutPerAttempt
		} else if _, ok := contract.ParseLadderObject(bd.Destination); ok && bd.DestinationType == topology.DestExchange {
			// Only a retry exchange binds to the ladder's entry.
			name, layout = strings.TrimSuffix(bd.Source, contract.RetryExchange("")), LayoutLevels
		}
		if owner, ok := returnQueueOwner(name); ok {
			name = owner
		}
		a := topology.Address{Kind: topology.KindQueue, Vhost: bd.Vhost, Name: name}
		if s, live := out[a]; live && layout != "" && s.layout == LayoutShared {
			s.layout = layout
			out[a] = s
		}
	}
	return out
}

// returnQueueOwner is the work queue of a return queue's name.
func returnQueueOwner(name string) (string, bool) {
	owner, ok := strings.CutSuffix(name, contract.ReturnQueue(""))
	return owner, ok && owner != ""
}

// String says in one line how a kept queue moves to the layout auto gives
// new queues.
func (k Kept) String() string {
	if k.Live == LayoutNative {
		return fmt.Sprintf("queue %q keeps its live layout native, which needs RabbitMQ %s; to move it back without losing a message, set layout: shared and migrate: true", k.Queue, rabbitmq.First(rabbitmq.Profile.NativeDelayedRetry))
	}
	if k.Auto == LayoutNative {
		return fmt.Sprintf("queue %q keeps its live layout %s; to move it to native without losing a message, set layout: native and migrate: true", k.Queue, k.Live)
	}
	if k.ReturnQueue {
		return fmt.Sprintf("queue %q keeps its live return queue %s: retry.Consume gets its retries on time, a consumer that is not retry.Consume %s late; return_queue: false brings them ahead of the backlog by message priority to every consumer (restart the helpers, wait for the longest delay, then prune %s)",
			k.Queue, contract.ReturnQueue(k.Queue), contract.FormatDelay(contract.ReturnQueueHandover), contract.ReturnQueue(k.Queue))
	}
	return fmt.Sprintf("queue %q keeps its live layout %s without a return queue; return_queue: true brings its retries back on time behind a backlog", k.Queue, k.Live)
}

// liveNativeShape is the shape of a live native queue, by its arguments.
func liveNativeShape(args map[string]any) nativeShape {
	if _, ok := contract.LimitInArguments(args); ok {
		return shapeBinding
	}
	if contract.IsInPlace(args) {
		return shapePolicy
	}
	return shapeArguments
}
