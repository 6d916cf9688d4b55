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
	var t topology.Topology
	for _, f := range files {
		b := newBuilder(&f.Spec, nil)
		b.build()
		b.into(&t)
	}
	t.Sort()
	return t
}

// origin records why an object exists, for collision errors.
type origin struct {
	at     pos
	what   string
	shared bool // generated once per vhost, legitimately by many queues
}

type builder struct {
	s         *Spec
	p         *problems // nil when only building
	queues    map[string]topology.Queue
	exchanges map[string]topology.Exchange
	origins   map[string]origin // "queue NAME" / "exchange NAME"
	bindings  map[topology.Address]topology.Binding
	policies  map[string]topology.Policy // rmqtopo-managed, by name
}

func newBuilder(s *Spec, p *problems) *builder {
	return &builder{
		s: s, p: p,
		queues:    map[string]topology.Queue{},
		exchanges: map[string]topology.Exchange{},
		origins:   map[string]origin{},
		bindings:  map[topology.Address]topology.Binding{},
		policies:  map[string]topology.Policy{},
	}
}

func (b *builder) errorf(at pos, format string, args ...any) {
	if b.p != nil {
		b.p.add(at, format, args...)
	}
}

func (b *builder) into(t *topology.Topology) {
	t.Vhosts = append(t.Vhosts, b.s.Vhost)
	// Grown once each: a large spec would otherwise copy them repeatedly.
	t.Exchanges = slices.Grow(t.Exchanges, len(b.exchanges))
	t.Queues = slices.Grow(t.Queues, len(b.queues))
	t.Bindings = slices.Grow(t.Bindings, len(b.bindings))
	t.Policies = slices.Grow(t.Policies, len(b.policies)+len(b.s.Policies))
	for _, e := range b.exchanges {
		t.Exchanges = append(t.Exchanges, e)
	}
	for _, q := range b.queues {
		t.Queues = append(t.Queues, q)
	}
	for _, bd := range b.bindings {
		t.Bindings = append(t.Bindings, bd)
	}
	for _, pol := range b.policies {
		t.Policies = append(t.Policies, pol)
	}
	for _, pol := range b.s.Policies {
		t.Policies = append(t.Policies, topology.Policy{
			Vhost: b.s.Vhost, Name: pol.Name, Pattern: pol.Pattern, ApplyTo: pol.ApplyTo,
			Priority: pol.Priority, Definition: topology.NormalizeArgs(pol.Definition),
		})
	}
}

func (b *builder) checkName(kind, name string, quorum bool, o origin) bool {
	switch {
	case name == "":
		// Decoding already said the name is missing.
	case len(name) > 255:
		b.errorf(o.at, "%s name %q is %d bytes; RabbitMQ allows 255 (%s)", kind, abbreviate(name), len(name), o.what)
	case quorum && len(b.s.Vhost)+1+len(name) > 255:
		b.errorf(o.at, "quorum queue %q is too long: its internal name %q must fit in 255 bytes, and is %d (%s)",
			abbreviate(name), "<vhost>_<name>", len(b.s.Vhost)+1+len(name), o.what)
	case topology.Reserved(name):
		b.errorf(o.at, "%s name %q uses the prefix \"amq.\", which RabbitMQ reserves (%s)", kind, name, o.what)
	case topology.IsRecordExchange(name):
		b.errorf(o.at, "%s name %q uses the prefix %q, which rmqtopo reserves for its ownership records (%s)", kind, name, topology.RecordPrefix, o.what)
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
	q.Arguments = topology.NormalizeArgs(q.Arguments)
	if !b.checkName("queue", q.Name, q.QueueType() == TypeQuorum, o) {
		return false
	}
	key := "queue " + q.Name
	if prev, ok := b.origins[key]; ok {
		if prev.shared && o.shared {
			return true
		}
		b.errorf(o.at, "queue %q (%s) collides with the queue %s", q.Name, o.what, prev.what)
		return false
	}
	b.origins[key] = o
	b.queues[q.Name] = q
	return true
}

func (b *builder) addExchange(e topology.Exchange, o origin) {
	e.Vhost = b.s.Vhost
	e.Arguments = topology.NormalizeArgs(e.Arguments)
	if !b.checkName("exchange", e.Name, false, o) {
		return
	}
	key := "exchange " + e.Name
	if prev, ok := b.origins[key]; ok {
		if prev.shared && o.shared {
			return
		}
		b.errorf(o.at, "exchange %q (%s) collides with the exchange %s", e.Name, o.what, prev.what)
		return
	}
	b.origins[key] = o
	b.exchanges[e.Name] = e
}

func (b *builder) bind(source, destType, dest, key string, args map[string]any) {
	bd := topology.Binding{Vhost: b.s.Vhost, Source: source, Destination: dest, DestinationType: destType,
		RoutingKey: key, Arguments: topology.NormalizeArgs(args)}
	b.bindings[bd.Addr()] = bd
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
	if _, ok := b.exchanges[bd.Exchange]; !ok {
		b.errorf(bd.at, "exchange %q is not declared in this spec", bd.Exchange)
	}
}

func (b *builder) build() {
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
	// Declared queues first, so a collision names the generated object as
	// the culprit.
	// A queue whose name is refused (or a duplicate) generates nothing:
	// every name derived from a bad name is bad the same way, and one
	// problem should be reported once.
	skip := map[int]bool{}
	for i, q := range s.Queues {
		if prev, ok := b.origins["queue "+q.Name]; ok && q.Name != "" {
			b.errorf(q.nameAt, "duplicate queue %q (first %s)", q.Name, prev.what)
			skip[i] = true
			continue
		}
		if !b.addDeclaredQueue(q, origin{at: q.nameAt, what: fmt.Sprintf("declared at queues[%d]", i)}) {
			skip[i] = true
		}
	}
	seen := &presetsSeen{}
	for i, q := range s.Queues {
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
	b.ladder()
	for _, pol := range s.Policies {
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
	if n := q.ImmediateRetries + len(q.Retry.Delays()); n > MaxRetries {
		b.errorf(q.retryAt, "%d retries in all; at most %d", n, MaxRetries)
	}
}

func (b *builder) generated(q Queue, what string) origin {
	return origin{at: q.nameAt, what: fmt.Sprintf("generated for queue %q as its %s", abbreviate(q.Name), what)}
}

func (b *builder) sharedOrigin(q Queue, what string) origin {
	return origin{at: q.nameAt, what: "generated as the vhost's " + what, shared: true}
}

// typeArgs returns the arguments every queue of the given type carries.
func typeArgs(typ string, deliveryLimit int) map[string]any {
	if typ != TypeQuorum {
		return map[string]any{}
	}
	return map[string]any{"x-queue-type": TypeQuorum, "x-delivery-limit": deliveryLimit}
}

// deadLetterTo adds dead-lettering to args, at-least-once where the queue
// type allows it so a message never vanishes between source and target.
func deadLetterTo(args map[string]any, exchange string, routingKey *string) {
	args["x-dead-letter-exchange"] = exchange
	if routingKey != nil {
		args["x-dead-letter-routing-key"] = *routingKey
	}
	if args["x-queue-type"] == TypeQuorum {
		args["x-dead-letter-strategy"] = "at-least-once"
		args["x-overflow"] = "reject-publish"
	}
}

// workQueueArgs are the arguments a work queue is declared with: its type,
// and what a preset's library declares besides. Everything else rmqtopo
// wants of the queue is in its policy (see policies.go).
func (b *builder) workQueueArgs(q Queue) map[string]any {
	args := declaredType(q.Type)
	switch q.Preset {
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
		b.addQueue(topology.Queue{Name: contract.DeadLetterQueue(q.Name), Arguments: typeArgs(q.Type, DeadEndDeliveryLimit)}, b.generated(q, "DLQ"))
	}
	if q.ParkingLot {
		b.addQueue(topology.Queue{Name: contract.ParkingLotQueue(q.Name), Arguments: typeArgs(q.Type, DeadEndDeliveryLimit)}, b.generated(q, "parking lot"))
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
	retry := contract.RetryExchange(q.Name)
	dlx := contract.DeadLetterExchange(q.Name)
	if q.DLQ {
		b.addExchange(topology.Exchange{Name: dlx, Type: "fanout", Durable: true}, b.generated(q, "dead-letter exchange"))
		b.bind(dlx, topology.DestQueue, contract.DeadLetterQueue(q.Name), "", nil)
	}
	// No alternate exchange: a copy past the last binding must come back to
	// its (mandatory) publisher as a return, which is how the service learns
	// that the schedule is exhausted (see package contract).
	b.addExchange(topology.Exchange{Name: retry, Type: "headers", Durable: true}, b.generated(q, "retry exchange"))
	b.deadEnds(q)
	b.queuePolicy(q.Name, workQueuePolicy(q, func(def map[string]any) {
		deadLetterPolicy(def, q.Type, dlx, nil)
	}))
	layout := b.s.layoutOf(q)
	// Retry k becomes delivery attempt k+1.
	for k := 1; k <= q.ImmediateRetries; k++ {
		b.bind(retry, topology.DestQueue, q.Name, "", contract.AttemptBindingArgs(k+1))
	}
	if layout == LayoutLevels {
		b.levelsRetries(q)
		return
	}
	for i, d := range q.Retry.Delays() {
		k := q.ImmediateRetries + i + 1
		typ := b.waitQueueType(q, layout)
		args := typeArgs(typ, DefaultDeliveryLimit)
		args["x-message-ttl"] = d.Milliseconds()
		var name string
		var o origin
		if layout == LayoutPerAttempt {
			name = contract.PerAttemptWaitQueue(q.Name, k, d)
			o = b.generated(q, "wait queue for retry "+strconv.Itoa(k))
			deadLetterTo(args, "", &q.Name)
		} else {
			name = contract.SharedWaitQueue(d)
			o = b.sharedOrigin(q, "shared wait queue for "+contract.FormatDelay(d))
			deadLetterTo(args, "", nil)
		}
		b.addQueue(topology.Queue{Name: name, Arguments: args}, o)
		b.bind(retry, topology.DestQueue, name, "", contract.AttemptBindingArgs(k+1))
	}
}
