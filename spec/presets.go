package spec

import (
	"fmt"
	"strconv"
	"time"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Presets reproduce, object for object, the topology that services written
// for an existing retry library declare for themselves, so those services
// can move to rmqtopo-managed topology without a code change. Their routing
// contracts are the libraries' own, not package contract's.

// goqueue (bxcodec/goqueue): a topic retry exchange routes "{q}__retry.{n}"
// to the queue of that name; retry queues carry no TTL (the service sets a
// per-message expiration) and dead-letter through a fanout exchange bound to
// the main queue.
func goqueueRetryExchange(q string) string     { return q + "__retry_exchange" }
func goqueueDLX(q string) string               { return q + "__dlx" }
func goqueueRetryQueue(q string, n int) string { return q + "__retry." + strconv.Itoa(n) }

func (b *builder) goqueue(q Queue) {
	ex, dlx := goqueueRetryExchange(q.Name), goqueueDLX(q.Name)
	b.addExchange(topology.Exchange{Name: ex, Type: "topic", Durable: true}, b.generated(q, "goqueue retry exchange"))
	b.addExchange(topology.Exchange{Name: dlx, Type: "fanout", Durable: true}, b.generated(q, "goqueue retry dead-letter exchange"))
	b.bind(dlx, topology.DestQueue, q.Name, "", nil)
	for n := 1; n <= len(q.Retry.Delays()); n++ {
		name := goqueueRetryQueue(q.Name, n)
		args := typeArgs(q.Type, DefaultDeliveryLimit)
		deadLetterTo(args, dlx, nil)
		b.addQueue(topology.Queue{Name: name, Arguments: args}, b.generated(q, fmt.Sprintf("goqueue retry queue %d", n)))
		b.bind(ex, topology.DestQueue, name, name, nil)
	}
	b.deadEnds(q)
}

// outbox: "{q}.delay_{d}s" quorum queues with a per-queue TTL that
// dead-letter through the default exchange straight back to {q}, and a
// quorum "{q}.dlq". The service publishes to the delay queue by name.
func outboxDelayQueue(q string, d time.Duration) string { return contract.OutboxDelayQueue(q, d) }

func (b *builder) outbox(q Queue) {
	for _, d := range q.Retry.Delays() {
		args := typeArgs(TypeQuorum, DefaultDeliveryLimit)
		args["x-message-ttl"] = d.Milliseconds()
		deadLetterTo(args, "", &q.Name)
		b.addQueue(topology.Queue{Name: outboxDelayQueue(q.Name, d), Arguments: args},
			origin{at: q.nameAt, what: fmt.Sprintf("generated for queue %q as its %s delay queue", abbreviate(q.Name), contract.FormatDelay(d)), shared: true})
	}
	if q.DLQ {
		b.addQueue(topology.Queue{Name: contract.DeadLetterQueue(q.Name), Arguments: typeArgs(TypeQuorum, DeadEndDeliveryLimit)}, b.generated(q, "DLQ"))
	}
	if q.ParkingLot {
		b.addQueue(topology.Queue{Name: contract.ParkingLotQueue(q.Name), Arguments: typeArgs(TypeQuorum, DeadEndDeliveryLimit)}, b.generated(q, "parking lot"))
	}
}

// spring: one headers "wait" exchange per vhost routes on the "wait-for"
// header (the delay, e.g. "10s") to "wait-queue-{d}"; each wait queue
// dead-letters into a headers "return" exchange that routes on "return-to"
// (the work queue's name). The service sets both headers.
const (
	springWaitExchange   = "wait"
	springReturnExchange = "return"
	SpringWaitHeader     = "wait-for"
	SpringReturnHeader   = "return-to"
)

func springWaitQueue(d time.Duration) string { return contract.SpringWaitQueue(d) }

func (b *builder) spring(q Queue) {
	b.addExchange(topology.Exchange{Name: springWaitExchange, Type: "headers", Durable: true}, b.sharedOrigin(q, "spring wait exchange"))
	b.addExchange(topology.Exchange{Name: springReturnExchange, Type: "headers", Durable: true}, b.sharedOrigin(q, "spring return exchange"))
	b.bind(springReturnExchange, topology.DestQueue, q.Name, "", map[string]any{"x-match": "all", SpringReturnHeader: q.Name})
	for _, d := range q.Retry.Delays() {
		name := springWaitQueue(d)
		typ := b.waitQueueType(q, LayoutShared)
		args := typeArgs(typ, DefaultDeliveryLimit)
		args["x-message-ttl"] = d.Milliseconds()
		deadLetterTo(args, springReturnExchange, nil)
		b.addQueue(topology.Queue{Name: name, Arguments: args}, b.sharedOrigin(q, "spring wait queue for "+contract.FormatDelay(d)))
		b.bind(springWaitExchange, topology.DestQueue, name, "", map[string]any{"x-match": "all", SpringWaitHeader: contract.FormatDelay(d)})
	}
	b.deadEnds(q)
}
