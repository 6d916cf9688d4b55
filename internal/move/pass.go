package move

import (
	"context"
	"fmt"
	"maps"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
)

// Decision is what a pass does with one message.
type Decision struct {
	Move bool
	// Note says why a message is left in place; Result.LeftBy counts the
	// notes.
	Note string
}

// Pass is one scan of a queue that moves some messages to a target queue
// and leaves every other message in place, in order; or, with UntilEmpty,
// one move of every message of a queue. ops.Pass, which the dlq commands
// run, is this type.
type Pass struct {
	// Queue is scanned; Target receives moved messages, through the default
	// exchange. An empty Target makes a read-only pass (a peek).
	Queue, Target string
	// Scan bounds the messages examined; 0 means the queue's depth when the
	// pass starts, so a pass never examines a message twice.
	Scan int
	// MaxMoves stops the pass after that many moves; 0 means no limit.
	MaxMoves int
	// Window is the most deliveries held at once (the consumer prefetch),
	// and so the most publishes awaiting a confirm.
	Window int
	// InPlaceRequeue says the queue puts a requeued message back where it
	// was (classic queues). Otherwise (quorum queues put it at their tail,
	// and unknown types are treated alike) a pass that stops early still
	// takes the rest of the queue, untouched, so that requeueing everything
	// in order keeps the order.
	InPlaceRequeue bool
	// UntilEmpty moves every message, those that arrive during the move
	// too, until the queue is drained: it has no ready message and none is
	// on its way to the pass (a migration's move; see consumer.drain).
	// Scan and MaxMoves do not apply. A move that stops (a failed copy, an
	// interrupt) does not take the rest of the queue: closing the channel
	// gives every unacknowledged message back, and the pass does not wait
	// for the broker to settle its acks, since other consumers make the
	// queue's counts say nothing about them (a migration waits for the
	// queue itself before deleting it).
	UntilEmpty bool
	// Decide is called once per examined message, in queue order, with its
	// 1-based position; nil moves every message.
	Decide func(position int, d *amqp.Delivery) Decision
	// Rewrite builds the copy published to Target; nil copies the message
	// (see Copy).
	Rewrite func(d *amqp.Delivery) amqp.Publishing
	// Progress, if set, is called after each examined message; with
	// UntilEmpty, after each acknowledgement of moves instead.
	Progress func(Result)
	// SettleTimeout bounds each wait for outstanding confirms, and the wait
	// for the broker to settle acks and requeues at the end; 0 means 30s.
	SettleTimeout time.Duration
	// ConsumerTag names the pass's first consumer; later ones get "-1",
	// "-2"... appended. Empty means rmqtopo-pass-0, rmqtopo-pass-1...
	ConsumerTag string
	// QueueError turns a failed passive declare of Queue into the error
	// the pass returns; nil wraps it with the queue's name.
	QueueError func(queue string, err error) error
}

// DefaultWindow is the default number of deliveries a pass holds at once.
const DefaultWindow = 1000

// Run runs the pass on a channel of its own over conn.
//
// Messages are consumed with manual acks and a prefetch of Window. A
// message to move is published to Target (persistent, mandatory, in
// confirm mode) and acked in the source only after the broker confirmed
// the copy; any other outcome keeps it unacked. Messages left in place are
// held unacked until the end of the pass, then requeued one by one in
// delivery order. When a consumer holds a full window of messages, it is
// cancelled (its deliveries stay held) and a new one takes the next
// window, so memory stays bounded by Window whatever the queue's depth.
// Before closing its channel, Run waits until the broker has settled every
// ack and requeue (not with UntilEmpty): closing earlier makes a quorum
// queue return unsettled messages out of order, and acked ones as
// duplicates.
func (p Pass) Run(ctx context.Context, conn *amqp.Connection) (Result, error) {
	p = p.withDefaults()
	r := &run{p: p, mode: modeOf(p), conn: conn, res: Result{Queue: p.Queue, Target: p.Target}}
	if p.Target != "" && p.Target == p.Queue {
		return r.res, fmt.Errorf("cannot move messages of queue %q to itself", p.Queue)
	}
	if err := r.open(); err != nil || r.limit == 0 {
		if r.ch != nil {
			r.ch.Close()
		}
		return r.res, err
	}
	r.scan(ctx)
	r.finish(ctx)
	if r.fatal == nil && r.ctxDone {
		r.fatal = fmt.Errorf("interrupted: %w", context.Cause(ctx))
	}
	return r.res, r.fatal
}

func (p Pass) withDefaults() Pass {
	if p.Window <= 0 {
		p.Window = DefaultWindow
	}
	if p.Window > 65535 {
		p.Window = 65535 // prefetch-count is a 16-bit field
	}
	if p.SettleTimeout <= 0 {
		p.SettleTimeout = 30 * time.Second
	}
	if p.Rewrite == nil {
		p.Rewrite = Copy
	}
	if p.QueueError == nil {
		p.QueueError = func(queue string, err error) error { return fmt.Errorf("queue %q: %w", queue, err) }
	}
	return p
}

// Copy returns a persistent copy of a delivery's message: same body,
// headers and properties. A user-id is dropped because the broker refuses
// a publish whose user-id is not the publishing user's, and so are the
// counts the broker set on the delivery (contract.DeliveryHeaders): they
// are the source queue's, not the message's.
func Copy(d *amqp.Delivery) amqp.Publishing {
	return amqp.Publishing{
		Headers:         withoutDeliveryHeaders(d.Headers),
		ContentType:     d.ContentType,
		ContentEncoding: d.ContentEncoding,
		DeliveryMode:    amqp.Persistent,
		Priority:        d.Priority,
		CorrelationId:   d.CorrelationId,
		ReplyTo:         d.ReplyTo,
		Expiration:      d.Expiration,
		MessageId:       d.MessageId,
		Timestamp:       d.Timestamp,
		Type:            d.Type,
		AppId:           d.AppId,
		Body:            d.Body,
	}
}

// withoutDeliveryHeaders returns h without contract.DeliveryHeaders, h
// itself when it has none.
func withoutDeliveryHeaders(h amqp.Table) amqp.Table {
	for name := range h {
		if contract.DeliveryHeaders(name) {
			out := maps.Clone(h)
			maps.DeleteFunc(out, func(name string, _ any) bool { return contract.DeliveryHeaders(name) })
			return out
		}
	}
	return h
}
