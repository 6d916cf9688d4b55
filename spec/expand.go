package spec

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/topology"
)

// DeadEndDeliveryLimit is the delivery limit of quorum DLQs and parking
// lots. They have no dead-letter exchange, so a message past the limit would
// be dropped; every peek that requeues counts as a delivery, and RabbitMQ 4.x
// defaults to 20. A million peeks is never; -1 (unlimited) is not understood
// the same way by 3.x.
const DeadEndDeliveryLimit = 1_000_000

// Expand returns the desired topology of the given files. It is pure: the
// same files always give the same, sorted topology. Files must come from
// Parse or LoadFiles, which reject anything Expand cannot express.
func Expand(files ...*File) topology.Topology {
	return ExpandFor(topology.Version{}, files...)
}

// origin records why an object exists, for collision errors. Its text is
// built only for a message: a spec generates an origin for each of its
// 100,000s of objects.
type origin struct {
	at pos
	// what the object is: with queue set, its role for that queue ("DLQ");
	// shared, its role in the vhost; otherwise all of it ("declared at
	// queues[3]").
	what   string
	queue  string
	shared bool // generated once per vhost, legitimately by many queues
}

func (o origin) String() string {
	switch {
	case o.queue != "":
		return fmt.Sprintf("generated for queue %q as its %s", abbreviate(o.queue), o.what)
	case o.shared:
		return "generated as the vhost's " + o.what
	}
	return o.what
}

// builder generates a spec's objects. Each kind is kept in the order
// generated, with an index by name for collisions and lookups, and handed
// to the topology as it is: a map of each kind, copied out at the end, was
// most of the memory a large spec took to load.
type builder struct {
	s *Spec
	p *problems // nil when only building
	// release is the RabbitMQ release expanded for (see release.go).
	release topology.Version

	queues    []topology.Queue
	queueFrom []origin
	queueAt   map[string]int

	exchanges    []topology.Exchange
	exchangeFrom []origin
	exchangeAt   map[string]int

	// bindings may repeat; into keeps one of each address.
	bindings []topology.Binding

	policies []topology.Policy // rmqtopo-managed
	policyAt map[string]int

	attempts    map[int]topology.Args    // see attemptArgs
	sharedWaits map[time.Duration]string // see sharedWaitQueue
}

func newBuilder(s *Spec, p *problems) *builder {
	return &builder{
		s: s, p: p,
		queueAt:    map[string]int{},
		exchangeAt: map[string]int{},
		policyAt:   map[string]int{},
	}
}

func (b *builder) errorf(at pos, format string, args ...any) {
	if b.p != nil {
		b.p.add(at, format, args...)
	}
}

// queue returns the generated queue of that name.
func (b *builder) queue(name string) (*topology.Queue, bool) {
	i, ok := b.queueAt[name]
	if !ok {
		return nil, false
	}
	return &b.queues[i], true
}

// into hands the builder's objects to t; the builder is not used after.
func (b *builder) into(t *topology.Topology) {
	t.Vhosts = append(t.Vhosts, b.s.Vhost)
	t.Exchanges = appendAll(t.Exchanges, b.exchanges)
	t.Queues = appendAll(t.Queues, b.queues)
	t.Bindings = appendAll(t.Bindings, uniqueBindings(b.bindings))
	t.Policies = appendAll(t.Policies, b.policies)
	for _, pol := range b.s.Policies {
		t.Policies = append(t.Policies, topology.Policy{
			Vhost: b.s.Vhost, Name: pol.Name, Pattern: pol.Pattern, ApplyTo: pol.ApplyTo,
			Priority: pol.Priority, Definition: topology.NormalizeArgs(pol.Definition),
		})
	}
}

// appendAll appends src to dst, or returns src itself when dst is empty: a
// large spec's slices are not copied. Nothing appended leaves dst as it
// was, nil included.
func appendAll[T any](dst, src []T) []T {
	switch {
	case len(src) == 0:
		return dst
	case len(dst) == 0:
		return src
	}
	return append(dst, src...)
}

// uniqueBindings sorts bs by address and keeps one binding of each
// address, the last generated, as the map it replaces did.
func uniqueBindings(bs []topology.Binding) []topology.Binding {
	slices.SortStableFunc(bs, topology.CompareBindings)
	n := 0
	for _, bd := range bs {
		if n > 0 && topology.CompareBindings(bs[n-1], bd) == 0 {
			bs[n-1] = bd
			continue
		}
		bs[n] = bd
		n++
	}
	clear(bs[n:])
	return bs[:n]
}

func (b *builder) checkName(kind, name string, quorum bool, o origin) bool {
	switch {
	case name == "":
		// Decoding already said the name is missing.
	case len(name) > 255:
		b.errorf(o.at, "%s name %q is %d bytes; RabbitMQ allows 255 (%s)", kind, abbreviate(name), len(name), o)
	case quorum && len(b.s.Vhost)+1+len(name) > 255:
		b.errorf(o.at, "quorum queue %q is too long: its internal name %q must fit in 255 bytes, and is %d (%s)",
			abbreviate(name), "<vhost>_<name>", len(b.s.Vhost)+1+len(name), o)
	case topology.Reserved(name):
		b.errorf(o.at, "%s name %q uses the prefix \"amq.\", which RabbitMQ reserves (%s)", kind, name, o)
	case topology.IsRecordExchange(name):
		b.errorf(o.at, "%s name %q uses the prefix %q, which rmqtopo reserves for its ownership records (%s)", kind, name, topology.RecordPrefix, o)
	default:
		return true
	}
	return false
}

// abbreviate shortens a name for a message, on a UTF-8 boundary.
func abbreviate(s string) string {
	if len(s) <= 40 {
		return s
	}
	n := 37
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

func (b *builder) addQueue(q topology.Queue, o origin) bool {
	q.Vhost = b.s.Vhost
	q.Durable = true
	if n := b.s.QuorumInitialGroupSize; n > 0 && q.Arguments["x-queue-type"] == TypeQuorum {
		// Set here, where every queue passes, so no generated quorum
		// queue is left to the broker's default group size.
		q.Arguments["x-quorum-initial-group-size"] = n
	}
	if !b.checkName("queue", q.Name, q.QueueType() == TypeQuorum, o) {
		return false
	}
	if i, ok := b.queueAt[q.Name]; ok {
		prev := b.queueFrom[i]
		if prev.shared && o.shared {
			return true
		}
		b.errorf(o.at, "queue %q (%s) collides with the queue %s", q.Name, o, prev)
		return false
	}
	q.Arguments = topology.NormalizeArgs(q.Arguments)
	b.queueAt[q.Name] = len(b.queues)
	b.queues = append(b.queues, q)
	b.queueFrom = append(b.queueFrom, o)
	return true
}

func (b *builder) addExchange(e topology.Exchange, o origin) {
	e.Vhost = b.s.Vhost
	e.Arguments = topology.NormalizeArgs(e.Arguments)
	if !b.checkName("exchange", e.Name, false, o) {
		return
	}
	if i, ok := b.exchangeAt[e.Name]; ok {
		prev := b.exchangeFrom[i]
		if prev.shared && o.shared {
			return
		}
		b.errorf(o.at, "exchange %q (%s) collides with the exchange %s", e.Name, o, prev)
		return
	}
	b.exchangeAt[e.Name] = len(b.exchanges)
	b.exchanges = append(b.exchanges, e)
	b.exchangeFrom = append(b.exchangeFrom, o)
}

func (b *builder) bind(source, destType, dest, key string, args map[string]any) {
	b.bindCanonical(source, destType, dest, key, topology.NormalizeArgs(args))
}

// bindCanonical is bind with arguments already canonical, which the
// binding shares.
func (b *builder) bindCanonical(source, destType, dest, key string, args topology.Args) {
	bd := topology.Binding{Vhost: b.s.Vhost, Source: source, Destination: dest, DestinationType: destType,
		RoutingKey: key, Arguments: args}
	b.bindings = append(b.bindings, bd)
}

// sharedWaitQueue is contract.SharedWaitQueue, named once per delay.
func (b *builder) sharedWaitQueue(d time.Duration) string {
	if name, ok := b.sharedWaits[d]; ok {
		return name
	}
	if b.sharedWaits == nil {
		b.sharedWaits = map[time.Duration]string{}
	}
	name := contract.SharedWaitQueue(d)
	b.sharedWaits[d] = name
	return name
}

// attemptArgs returns the arguments of a retry exchange's binding for the
// attempt: one table for each attempt, shared by every queue's binding, as
// nothing changes an expanded topology's arguments. A table each was a
// third of a large spec's memory.
func (b *builder) attemptArgs(attempt int) topology.Args {
	if a, ok := b.attempts[attempt]; ok {
		return a
	}
	if b.attempts == nil {
		b.attempts = map[int]topology.Args{}
	}
	a := topology.NormalizeArgs(contract.AttemptBindingArgs(attempt))
	b.attempts[attempt] = a
	return a
}

// checkSource reports a binding whose source exchange the spec does not
// declare; amq.* exchanges exist on every vhost.
func (b *builder) checkSource(bd Binding) {
	if bd.Exchange == "" {
		b.errorf(bd.at, "cannot bind to the default exchange \"\": it routes by queue name already")
		return
	}
	if len(bd.RoutingKey) > topology.MaxNameBytes {
		b.errorf(bd.at, "routing key %q is %d bytes; RabbitMQ allows %d", abbreviate(bd.RoutingKey), len(bd.RoutingKey), topology.MaxNameBytes)
	}
	if topology.Reserved(bd.Exchange) {
		return
	}
	if _, ok := b.exchangeAt[bd.Exchange]; !ok {
		b.errorf(bd.at, "exchange %q is not declared in this spec", bd.Exchange)
	}
}

// reserve sizes the builder's slices and indexes for what the spec's
// queues generate under rmqtopo's own contract, so that a large spec's
// objects are not copied over and over as they grow. It is a hint:
// presets and ladders generate other counts.
func (b *builder) reserve() {
	var queues, exchanges, bindings, policies int
	exchanges = len(b.s.Exchanges)
	for _, e := range b.s.Exchanges {
		bindings += len(e.Bindings)
	}
	for _, q := range b.s.Queues {
		queues++
		bindings += len(q.Bindings)
		if q.Raw {
			continue
		}
		policies++
		exchanges++ // the retry exchange
		bindings += q.ImmediateRetries + q.Retry.count()
		if q.DLQ {
			queues, exchanges, bindings = queues+1, exchanges+1, bindings+1
		}
		if q.ParkingLot {
			queues++
		}
		if b.s.layoutOf(q) == LayoutPerAttempt {
			queues += q.Retry.count()
		}
	}
	// Room for what is generated once per vhost: shared wait queues, a
	// ladder (and its binding to every queue).
	queues, exchanges, bindings = queues+64, exchanges+64, bindings+512
	if _, ok := b.s.Ladder(); ok {
		bindings += len(b.s.Queues)
	}
	b.queues, b.queueFrom = make([]topology.Queue, 0, queues), make([]origin, 0, queues)
	b.exchanges, b.exchangeFrom = make([]topology.Exchange, 0, exchanges), make([]origin, 0, exchanges)
	b.bindings = make([]topology.Binding, 0, bindings)
	b.policies = make([]topology.Policy, 0, policies)
	b.queueAt = make(map[string]int, queues)
	b.exchangeAt = make(map[string]int, exchanges)
	b.policyAt = make(map[string]int, policies)
}

func (b *builder) build() {
	b.reserve()
	b.buildExchanges()
	skip := b.declareQueues()
	b.buildQueues(skip)
	b.ladder()
	b.checkPolicies()
	b.checkRetired()
}

// buildExchanges adds the spec's exchanges, then their bindings, so a
// binding between two declared exchanges finds both.
func (b *builder) buildExchanges() {
	s := b.s
	for i, e := range s.Exchanges {
		b.addExchange(topology.Exchange{Name: e.Name, Type: e.Type, Durable: e.Durable, AutoDelete: e.AutoDelete,
			Internal: e.Internal, Arguments: e.Arguments}, origin{at: e.nameAt, what: fmt.Sprintf("declared at exchanges[%d]", i)})
	}
	for _, e := range s.Exchanges {
		for _, bd := range e.Bindings {
			b.checkSource(bd)
			b.bind(bd.Exchange, topology.DestExchange, e.Name, bd.RoutingKey, bd.Arguments)
		}
	}
}

// declareQueues adds the declared queues, before anything is generated
// from them, and returns the indexes of those refused.
func (b *builder) declareQueues() map[int]bool {
	// Declared queues first, so a collision names the generated object as
	// the culprit.
	// A queue whose name is refused (or a duplicate) generates nothing:
	// every name derived from a bad name is bad the same way, and one
	// problem should be reported once.
	skip := map[int]bool{}
	for i, q := range b.s.Queues {
		if first, ok := b.queueAt[q.Name]; ok && q.Name != "" {
			b.errorf(q.nameAt, "duplicate queue %q (first %s)", q.Name, b.queueFrom[first])
			skip[i] = true
			continue
		}
		if !b.addDeclaredQueue(q, origin{at: q.nameAt, what: fmt.Sprintf("declared at queues[%d]", i)}) {
			skip[i] = true
		}
	}
	return skip
}

// buildQueues adds each declared queue's bindings and, but for raw
// queues, checks it and generates what its preset (or native retry)
// needs; queues in skip are left out.
func (b *builder) buildQueues(skip map[int]bool) {
	seen := &presetsSeen{}
	for i, q := range b.s.Queues {
		if skip[i] {
			continue
		}
		b.checkPresetOptions(q, seen)
		for _, bd := range q.Bindings {
			b.checkSource(bd)
			b.bind(bd.Exchange, topology.DestQueue, q.Name, bd.RoutingKey, bd.Arguments)
		}
		if q.Raw {
			continue
		}
		b.checkQueue(q)
		b.checkJitter(q)
		switch q.Preset {
		case PresetGoQueue:
			b.goqueue(q)
		case PresetOutbox:
			b.outbox(q)
		case PresetSpring:
			b.spring(q)
		default:
			b.native(q)
		}
	}
}

// checkPolicies reports the spec's policies whose pattern does not
// compile or whose name is one rmqtopo keeps for its own.
func (b *builder) checkPolicies() {
	for _, pol := range b.s.Policies {
		if _, err := regexp.Compile(pol.Pattern); err != nil {
			b.errorf(pol.patternAt, "policy %q: invalid pattern %q: %v", pol.Name, pol.Pattern, err)
		}
		if contract.IsManagedPolicy(pol.Name) {
			b.errorf(pol.at, "policy %q: names starting with %q belong to the policies rmqtopo manages", pol.Name, contract.ManagedPolicyPrefix)
		}
	}
}

func (b *builder) checkQueue(q Queue) {
	if q.DeliveryLimit != 0 && q.Type != TypeQuorum {
		b.errorf(q.deliveryLimitAt, "delivery_limit needs a quorum queue: classic queues refuse x-delivery-limit (406)")
	}
	if q.Preset != PresetNone {
		if q.ImmediateRetries > 0 {
			b.errorf(q.at, "immediate_retries is not part of the %s preset's contract", q.Preset)
		}
		if q.Layout != "" {
			b.errorf(q.layoutAt, "layout does not apply to a queue with preset %s: the preset fixes its wait queues", q.Preset)
		}
	}
	if q.Preset == PresetOutbox {
		for i, d := range q.Retry.Delays() {
			if d%time.Second != 0 {
				b.errorf(q.retryAt, "the outbox preset names wait queues in whole seconds; delay %d (%s) is not", i+1, d)
			}
		}
	}
	b.checkReturnQueue(q)
	b.checkDLQName(q)
	if n := q.ImmediateRetries + q.Retry.count(); n > MaxRetries {
		b.errorf(q.retryAt, "%d retries in all; at most %d", n, MaxRetries)
	}
}

func (b *builder) generated(q Queue, what string) origin {
	return origin{at: q.nameAt, what: what, queue: q.Name}
}

func (b *builder) sharedOrigin(q Queue, what string) origin {
	return origin{at: q.nameAt, what: what, shared: true}
}

// workQueueArgs are the arguments a work queue is declared with: its type;
// for rmqtopo's own contract, what rmqtopo never changes in place (see
// policies.go); for a preset, what its library declares besides.
// Everything else rmqtopo wants of the queue is in its policy.
func (b *builder) workQueueArgs(q Queue) map[string]any {
	args := declaredType(q.Type)
	switch q.Preset {
	case PresetNone:
		b.nativeArgs(args, q)
	case PresetSpring:
		// deadLetterExchange(DL_EXCHANGE), declared with or without a DLQ.
		args["x-dead-letter-exchange"] = springNamesOf(q).dlx
	case PresetGoQueue:
		for k, v := range q.PresetOptions.QueueArguments {
			args[k] = v
		}
	}
	return args
}

func (b *builder) deadEnds(q Queue) {
	if q.DLQ {
		o := b.generated(q, "DLQ")
		if q.DLQName != "" {
			o.at = q.dlqNameAt // a bad or colliding name is the dlq_name's
		}
		b.addQueue(topology.Queue{Name: DLQOf(q), Arguments: deadEndArgs(q.Type)}, o)
	}
	if q.ParkingLot {
		b.addQueue(topology.Queue{Name: contract.ParkingLotQueue(q.Name), Arguments: deadEndArgs(q.Type)}, b.generated(q, "parking lot"))
	}
}

func (b *builder) waitQueueType(q Queue, layout Layout) string {
	if layout == LayoutShared {
		if b.s.WaitQueueType != "" {
			return b.s.WaitQueueType
		}
		return TypeQuorum
	}
	return q.Type
}

// native builds rmqtopo's own contract (see package contract).
func (b *builder) native(q Queue) {
	if b.s.layoutOf(q) == LayoutNative {
		b.nativeLayout(q) // nativelayout.go
		return
	}
	retry := contract.RetryExchange(q.Name)
	dlx := contract.DeadLetterExchange(q.Name)
	if q.DLQ {
		b.addExchange(topology.Exchange{Name: dlx, Type: "fanout", Durable: true}, b.generated(q, "dead-letter exchange"))
		b.bind(dlx, topology.DestQueue, DLQOf(q), "", nil)
	}
	// No alternate exchange: a copy past the last binding must come back to
	// its (mandatory) publisher as a return, which is how the service learns
	// that the schedule is exhausted (see package contract).
	b.addExchange(topology.Exchange{Name: retry, Type: "headers", Durable: true}, b.generated(q, "retry exchange"))
	b.deadEnds(q)
	b.returnQueue(q)
	b.queuePolicy(q.Name, setAttributes(q))
	layout := b.s.layoutOf(q)
	// Retry k becomes delivery attempt k+1.
	for k := 1; k <= q.ImmediateRetries; k++ {
		b.bindCanonical(retry, topology.DestQueue, q.Name, "", b.attemptArgs(k+1))
	}
	if layout == LayoutLevels {
		b.levelsRetries(q)
		return
	}
	for i, d := range q.Retry.Delays() {
		k := q.ImmediateRetries + i + 1
		if layout == LayoutShared {
			// Most queues find their shared wait queue made already: only
			// the binding is theirs.
			name := b.sharedWaitQueue(d)
			if j, ok := b.queueAt[name]; ok && b.queueFrom[j].shared {
				b.bindCanonical(retry, topology.DestQueue, name, "", b.attemptArgs(k+1))
				continue
			}
		}
		typ := b.waitQueueType(q, layout)
		args := b.typeArgs(typ)
		args["x-message-ttl"] = d.Milliseconds()
		var name string
		var o origin
		if layout == LayoutPerAttempt {
			back := ReturnTo(q)
			name = contract.PerAttemptWaitQueue(back, k, d)
			o = b.generated(q, "wait queue for retry "+strconv.Itoa(k))
			deadLetterTo(args, "", &back)
		} else {
			name = b.sharedWaitQueue(d)
			o = b.sharedOrigin(q, "shared wait queue for "+contract.FormatDelay(d))
			deadLetterTo(args, "", nil)
		}
		b.addQueue(topology.Queue{Name: name, Arguments: args}, o)
		b.bindCanonical(retry, topology.DestQueue, name, "", b.attemptArgs(k+1))
	}
}
