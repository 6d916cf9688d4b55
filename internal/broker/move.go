package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// MoveWindow is the most messages a move holds unacknowledged at once:
// its consumer prefetch, and so the bound on publishes awaiting a confirm.
const MoveWindow = 1000

// moveAckEvery is how many confirmed moves are acknowledged at once (one
// basic.ack with multiple set).
const moveAckEvery = 100

// moveIdle is how long a move waits without a delivery before it asks the
// source whether it is empty.
const moveIdle = 50 * time.Millisecond

// Move moves every message of queue src to queue dst in vhost, until src
// has no ready message, and returns how many it moved. progress, if set,
// is called with the count so far after each acknowledgement.
//
// Each message is published to dst through the default exchange,
// persistent and mandatory, in confirm mode, and acknowledged in src only
// once the broker confirmed the copy: a crash at any point leaves each
// message in src, in dst, or (published, confirmed, not yet acknowledged)
// in both, never in neither. A copy returned as unroutable (dst is gone)
// or nacked stops the move with its source unacknowledged, so the broker
// puts it back in src. Messages keep their order: one consumer, one
// channel, publishes in delivery order. Other consumers of src may take
// messages meanwhile; they are theirs.
func (s *Session) Move(ctx context.Context, vhost, src, dst string, progress func(int)) (int, error) {
	conn, err := s.Dial(vhost, "migrate")
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return 0, amqpError(s.display, err)
	}
	mv := &mover{ch: ch, conn: conn, src: src, dst: dst, progress: progress}
	if err := mv.start(); err != nil {
		return 0, amqpError(s.display, err)
	}
	err = mv.loop(ctx)
	if err != nil {
		var ae *amqp.Error
		if errors.As(err, &ae) {
			err = amqpError(s.display, err)
		}
	}
	return mv.acked, err
}

type mover struct {
	ch         *amqp.Channel
	conn       *amqp.Connection
	src, dst   string
	progress   func(int)
	deliveries <-chan amqp.Delivery
	confirms   chan amqp.Confirmation
	returns    chan amqp.Return
	closed     chan *amqp.Error
	// pending holds, in publish order, the delivery tags of the moves
	// awaiting a confirm; confirms come in the same order.
	pending []uint64
	// lastConfirmed is the delivery tag of the last confirmed move not
	// yet acknowledged, 0 when none.
	lastConfirmed uint64
	unackedOK     int
	acked         int
	// failed: a move was returned or nacked. Nothing is acknowledged any
	// more, because an ack of a later tag with multiple set would
	// acknowledge the failed one too.
	failed bool
}

func (mv *mover) start() error {
	if err := mv.ch.Confirm(false); err != nil {
		return err
	}
	if err := mv.ch.Qos(MoveWindow, 0, false); err != nil {
		return err
	}
	// At most MoveWindow publishes await a confirm (each needs an
	// unacknowledged delivery), so these buffers never fill and the
	// client never blocks or drops one.
	mv.confirms = mv.ch.NotifyPublish(make(chan amqp.Confirmation, MoveWindow+1))
	mv.returns = mv.ch.NotifyReturn(make(chan amqp.Return, MoveWindow+1))
	mv.closed = mv.ch.NotifyClose(make(chan *amqp.Error, 1))
	d, err := mv.ch.Consume(mv.src, "rmqtopo-migrate", false, false, false, false, nil)
	mv.deliveries = d
	return err
}

// loop moves until the source is empty, the context is done, or a move
// fails.
func (mv *mover) loop(ctx context.Context) error {
	idle := time.NewTimer(moveIdle)
	defer idle.Stop()
	for {
		select {
		case d, ok := <-mv.deliveries:
			if !ok {
				return mv.settle(fmt.Errorf("the broker cancelled the move from queue %q", mv.src))
			}
			if err := mv.publish(&d); err != nil {
				return mv.settle(err)
			}
			idle.Reset(moveIdle)
		case c := <-mv.confirms:
			if err := mv.confirmed(c); err != nil {
				return mv.settle(err)
			}
		case e := <-mv.closed:
			return fmt.Errorf("the broker closed the channel: %w; unacknowledged messages went back to queue %q", e, mv.src)
		case <-idle.C:
			done, err := mv.drained()
			if err != nil || done {
				return mv.settle(err)
			}
			idle.Reset(moveIdle)
		case <-ctx.Done():
			return mv.settle(fmt.Errorf("interrupted: %w", ctx.Err()))
		}
	}
}

func (mv *mover) publish(d *amqp.Delivery) error {
	err := mv.ch.PublishWithContext(context.Background(), "", mv.dst, true, false, CopyMessage(d))
	if err != nil {
		return fmt.Errorf("publish to queue %q: %w", mv.dst, err)
	}
	mv.pending = append(mv.pending, d.DeliveryTag)
	return nil
}

// confirmed handles the confirm of the oldest move in flight. A return of
// a publish reaches the client before its confirm, and the client queues
// it before it reads the confirm, so any return is in mv.returns by now.
func (mv *mover) confirmed(c amqp.Confirmation) error {
	if len(mv.pending) == 0 {
		return fmt.Errorf("a confirm for no publish (%d)", c.DeliveryTag)
	}
	tag := mv.pending[0]
	mv.pending = mv.pending[1:]
	select {
	case r := <-mv.returns:
		mv.failed = true
		return fmt.Errorf("queue %q returned a moved message as unroutable (%s); it stays in queue %q", mv.dst, r.ReplyText, mv.src)
	default:
	}
	if !c.Ack {
		mv.failed = true
		return fmt.Errorf("the broker did not confirm a move to queue %q; it stays in queue %q", mv.dst, mv.src)
	}
	mv.lastConfirmed = tag
	mv.unackedOK++
	if mv.unackedOK >= moveAckEvery || len(mv.pending) == 0 {
		return mv.ack()
	}
	return nil
}

// ack acknowledges every confirmed move at once: delivery tags grow with
// delivery order, which is publish order, which is confirm order.
func (mv *mover) ack() error {
	if mv.lastConfirmed == 0 || mv.failed {
		return nil
	}
	if err := mv.ch.Ack(mv.lastConfirmed, true); err != nil {
		return fmt.Errorf("acknowledge moved messages in queue %q: %w", mv.src, err)
	}
	mv.acked += mv.unackedOK
	mv.lastConfirmed, mv.unackedOK = 0, 0
	if mv.progress != nil {
		mv.progress(mv.acked)
	}
	return nil
}

// drained reports whether the move is over: nothing in flight and no
// ready message in the source.
func (mv *mover) drained() (bool, error) {
	if len(mv.pending) > 0 {
		return false, nil
	}
	ch, err := mv.conn.Channel()
	if err != nil {
		return false, err
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(mv.src, false, false, false, false, nil)
	if err != nil {
		return false, fmt.Errorf("count the messages of queue %q: %w", mv.src, err)
	}
	return q.Messages == 0, nil
}

// settle waits (bounded) for the confirms of the moves in flight and
// acknowledges the confirmed ones, so that an interrupted move leaves few
// duplicates; cause is returned. Whatever stays unacknowledged goes back
// to the source when the channel closes.
func (mv *mover) settle(cause error) error {
	deadline := time.After(30 * time.Second)
	for len(mv.pending) > 0 {
		select {
		case c := <-mv.confirms:
			if err := mv.confirmed(c); err != nil {
				return errors.Join(cause, err)
			}
		case <-mv.closed:
			return cause
		case <-deadline:
			return cause
		}
	}
	if err := mv.ack(); err != nil {
		return errors.Join(cause, err)
	}
	return cause
}

// CopyMessage returns a persistent copy of a delivery's message: same
// body, headers and properties. A user-id is dropped because the broker
// refuses a publish whose user-id is not the publishing user's.
func CopyMessage(d *amqp.Delivery) amqp.Publishing {
	return amqp.Publishing{
		Headers:         d.Headers,
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
