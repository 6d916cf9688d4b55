package spec

import (
	"fmt"
	"time"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Presets reproduce, object for object and argument for argument, the
// topology that services written for an existing retry library declare for
// themselves at start-up: a declare whose arguments differ from the
// existing queue's fails with 406 PRECONDITION_FAILED and stops the
// service. What rmqtopo adds beyond the library (a DLQ for what the library
// would drop, at-least-once dead-lettering, delivery limits, GoQueue's TTL
// cap) is in rmqtopo-managed policies, which no declare can conflict with.
// Their routing contracts are the libraries' own, not package contract's.

// goqueue (bxcodec/goqueue, consumer/rabbitmq): a durable topic exchange
// "{q}__retry_exchange" routes "{q}__retry.{n}" to the classic queue of that
// name, declared with exactly {x-dead-letter-exchange: {q}__retry_dlx}; the
// durable fanout "{q}__retry_dlx" is bound to {q} with key "". The work
// queue carries the user's own arguments (its type here).
//
// By policy rmqtopo adds: each retry queue's TTL, equal to the documented
// delay, which caps the library's per-message expiration of ten times that
// delay (the lower TTL wins); the work queue's dead-lettering into {q}.dlq,
// for what the library nacks without requeue (dropped without a DLX); and,
// on the retry exchange, an alternate exchange for the retry published past
// the last retry queue, which the library would lose as unroutable.
func goqueueRetryQueue(q string, n int) string { return contract.GoQueueRetryQueue(q, n) }

func (b *builder) goqueue(q Queue) {
	ex, dlx := contract.GoQueueRetryExchange(q.Name), contract.GoQueueRetryDLX(q.Name)
	b.addExchange(topology.Exchange{Name: ex, Type: "topic", Durable: true}, b.generated(q, "goqueue retry exchange"))
	b.addExchange(topology.Exchange{Name: dlx, Type: "fanout", Durable: true}, b.generated(q, "goqueue retry dead-letter exchange"))
	b.bind(dlx, topology.DestQueue, q.Name, "", nil)
	dlq := contract.DeadLetterQueue(q.Name)
	b.queuePolicy(q.Name, workQueuePolicy(q, func(def map[string]any) { deadLetterPolicy(def, q.Type, "", &dlq) }))
	for n, d := range q.Retry.Delays() {
		name := goqueueRetryQueue(q.Name, n+1)
		b.addQueue(topology.Queue{Name: name, Arguments: map[string]any{"x-dead-letter-exchange": dlx}},
			b.generated(q, fmt.Sprintf("goqueue retry queue %d", n+1)))
		b.bind(ex, topology.DestQueue, name, name, nil)
		b.queuePolicy(name, map[string]any{keyMessageTTL: d.Milliseconds()})
	}
	if q.DLQ {
		exhausted := contract.ExhaustedQueue(q.Name)
		b.addExchange(topology.Exchange{Name: exhausted, Type: "fanout", Durable: true}, b.generated(q, "exhausted-retry exchange"))
		b.addQueue(topology.Queue{Name: exhausted, Arguments: map[string]any{"x-message-ttl": 0,
			"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq}}, b.generated(q, "exhausted-retry queue"))
		b.bind(exhausted, topology.DestQueue, exhausted, "", nil)
		b.addPolicy(contract.ExchangePolicy(ex), contract.ExactPattern(ex), "exchanges",
			map[string]any{keyAlternateExchange: exhausted})
	}
	b.deadEnds(q)
}

// outbox: the listener declares "{q}.delay_{d}s" with exactly
// x-message-ttl, x-dead-letter-exchange "", x-dead-letter-routing-key {q}
// and x-queue-type quorum; the service publishes to it by name. rmqtopo
// adds, by policy, at-least-once dead-lettering on every delay queue of {q}
// (retired ones included, while they drain), and the work queue's
// dead-lettering into a quorum {q}.dlq.
func outboxDelayQueue(q string, d time.Duration) string { return contract.OutboxDelayQueue(q, d) }

func (b *builder) outbox(q Queue) {
	for _, d := range q.Retry.Delays() {
		args := map[string]any{"x-queue-type": TypeQuorum, "x-message-ttl": d.Milliseconds(),
			"x-dead-letter-exchange": "", "x-dead-letter-routing-key": q.Name}
		b.addQueue(topology.Queue{Name: outboxDelayQueue(q.Name, d), Arguments: args},
			origin{at: q.nameAt, what: contract.FormatDelay(d) + " delay queue", queue: q.Name, shared: true})
	}
	if len(q.Retry.Delays()) > 0 {
		def := map[string]any{}
		atLeastOnceFor(def, TypeQuorum)
		b.addPolicy(contract.OutboxDelayPolicy(q.Name), contract.OutboxDelayPattern(q.Name), "queues", def)
	}
	dlq := contract.DeadLetterQueue(q.Name)
	b.queuePolicy(q.Name, workQueuePolicy(q, func(def map[string]any) { deadLetterPolicy(def, q.Type, "", &dlq) }))
	if q.DLQ {
		b.addQueue(topology.Queue{Name: dlq, Arguments: deadEndArgs(TypeQuorum)}, b.generated(q, "DLQ"))
	}
	if q.ParkingLot {
		b.addQueue(topology.Queue{Name: contract.ParkingLotQueue(q.Name), Arguments: deadEndArgs(TypeQuorum)}, b.generated(q, "parking lot"))
	}
}

// spring: one headers exchange "wait" per vhost routes on the "wait-for"
// header, the delay in milliseconds as a string ("1000"), to
// "wait-queue-{ms}", declared QueueBuilder.durable(prefix + d).ttl(d)
// .deadLetterExchange("return"): a classic queue with exactly x-message-ttl
// and x-dead-letter-exchange. The headers exchange "return" routes on
// "return-to" (the work queue's name) back to the work queue, declared
// with exactly deadLetterExchange(DL_EXCHANGE), here {q}.dlx, a fanout into
// {q}.dlq. Bindings are where(header).matches(value): the header alone, no
// x-match (RabbitMQ's default is all). rmqtopo adds, by policy, the work
// queue's delivery limit and at-least-once dead-lettering when quorum.
const (
	// DefaultSpringWaitExchange and DefaultSpringReturnExchange are the
	// Spring design's WAIT_EXCHANGE and RETURN_EXCHANGE unless
	// preset_options says otherwise.
	DefaultSpringWaitExchange   = "wait"
	DefaultSpringReturnExchange = "return"
	SpringWaitHeader            = "wait-for"
	SpringReturnHeader          = "return-to"
)

// springNames are the names a spring queue's service uses.
type springNames struct{ wait, ret, prefix, dlx string }

func springNamesOf(q Queue) springNames {
	o := q.PresetOptions
	n := springNames{wait: o.WaitExchange, ret: o.ReturnExchange, prefix: o.WaitQueuePrefix, dlx: o.DeadLetterExchange}
	if n.wait == "" {
		n.wait = DefaultSpringWaitExchange
	}
	if n.ret == "" {
		n.ret = DefaultSpringReturnExchange
	}
	if n.prefix == "" {
		n.prefix = contract.SpringWaitQueuePrefix
	}
	if n.dlx == "" {
		n.dlx = contract.DeadLetterExchange(q.Name)
	}
	return n
}

func springWaitQueue(q Queue, d time.Duration) string {
	return contract.SpringWaitQueueWithPrefix(springNamesOf(q).prefix, d)
}

func (b *builder) spring(q Queue) {
	n := springNamesOf(q)
	b.addExchange(topology.Exchange{Name: n.wait, Type: "headers", Durable: true}, b.sharedOrigin(q, "spring wait exchange"))
	b.addExchange(topology.Exchange{Name: n.ret, Type: "headers", Durable: true}, b.sharedOrigin(q, "spring return exchange"))
	b.bind(n.ret, topology.DestQueue, q.Name, "", map[string]any{SpringReturnHeader: q.Name})
	for _, d := range q.Retry.Delays() {
		name := springWaitQueue(q, d)
		args := map[string]any{"x-message-ttl": d.Milliseconds(), "x-dead-letter-exchange": n.ret}
		b.addQueue(topology.Queue{Name: name, Arguments: args}, b.sharedOrigin(q, "spring wait queue for "+contract.FormatDelay(d)))
		b.bind(n.wait, topology.DestQueue, name, "", map[string]any{SpringWaitHeader: contract.SpringWaitFor(d)})
	}
	b.queuePolicy(q.Name, workQueuePolicy(q, func(def map[string]any) { atLeastOnceFor(def, q.Type) }))
	if q.DLQ {
		b.addExchange(topology.Exchange{Name: n.dlx, Type: "fanout", Durable: true}, b.generated(q, "dead-letter exchange (DL_EXCHANGE)"))
		b.bind(n.dlx, topology.DestQueue, contract.DeadLetterQueue(q.Name), "", nil)
	}
	b.deadEnds(q)
}

// presetsSeen is what checkPresetOptions remembers across a file's queues.
type presetsSeen struct {
	spring springNames
}

// checkPresetOptions checks a queue's preset_options (the decoder already
// took only the keys of the queue's preset): the spring exchanges and prefix are shared by the vhost's
// spring queues, so all must agree (a DL_EXCHANGE, which rmqtopo fans out
// into one DLQ, is one queue's: two queues naming the same one collide
// like any generated exchange); and GoQueue's queue arguments must not
// contradict the queue's type or take the place of its DLQ.
func (b *builder) checkPresetOptions(q Queue, seen *presetsSeen) {
	o := q.PresetOptions
	if q.Preset == PresetSpring {
		n := springNamesOf(q)
		if seen.spring.wait == "" {
			seen.spring = n
		} else if s := seen.spring; n.wait != s.wait || n.ret != s.ret || n.prefix != s.prefix {
			b.errorf(q.presetOptionsAt, "spring queues of one vhost share their wait and return exchanges and wait-queue prefix: "+
				"queue %q uses %q, %q, %q; another uses %q, %q, %q", abbreviate(q.Name), n.wait, n.ret, n.prefix, s.wait, s.ret, s.prefix)
		}
	}
	if _, ok := o.QueueArguments["x-queue-type"]; ok {
		b.errorf(o.queueArgumentsAt, "queue_arguments sets x-queue-type; set the queue's type instead")
	}
	if _, ok := o.QueueArguments["x-dead-letter-exchange"]; ok && q.DLQ {
		b.errorf(o.queueArgumentsAt, "queue_arguments sets x-dead-letter-exchange, which beats the DLQ rmqtopo adds by policy; set dlq: false")
	}
}
