package move

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// ackEvery is how many confirmed moves are acknowledged at once when one
// basic.ack with multiple set covers exactly them (see confirmer.ack):
// acking each message alone made a migration markedly slower.
const ackEvery = 100

// confirmer publishes the copies of a pass's moves in confirm mode and
// acknowledges each source only once the broker confirmed its copy. A
// source whose copy is returned, nacked or not confirmed in time is given
// up: left unacknowledged, so it stays in the source queue.
//
// Confirms are pipelined: publishing goes on while earlier copies await
// their confirm, up to the pass's window.
type confirmer struct {
	ch       *amqp.Channel
	queue    string // the source, for errors
	target   string
	confirms chan amqp.Confirmation
	returns  chan amqp.Return
	// window bounds the publishes awaiting a confirm. The notification
	// buffers hold that many and one more, so the client never blocks its
	// reader on them, nor drops a notification (amqp091 drops one it could
	// not hand over within seconds).
	window int
	// pending holds, in publish order, the delivery tags of the moves
	// awaiting a confirm. Confirms come in publish order, numbered from 1;
	// seq counts those handled, to notice one missing.
	pending []uint64
	seq     uint64
	// confirmed holds, in order, the delivery tags of the confirmed moves
	// not yet acknowledged.
	confirmed []uint64
	// ackedThrough: every delivery tag up to it is acknowledged. An ack
	// with multiple set is only sent for confirmed tags that directly
	// follow it, so it never acknowledges a message the pass holds, a
	// failed move, or a delivery the client dropped.
	ackedThrough uint64
	// failed: a move failed or the channel went. Nothing is acknowledged
	// any more: a return does not say which publish it answers, so once
	// one was seen no later confirm can be trusted.
	failed bool
	// onAck hears of n more moves acknowledged; onGiveUp of a move given
	// up, whose source stays unacknowledged.
	onAck    func(n int)
	onGiveUp func(tag uint64)
}

func newConfirmer(ch *amqp.Channel, queue, target string, window int) (*confirmer, error) {
	if err := ch.Confirm(false); err != nil {
		return nil, fmt.Errorf("confirm mode: %w", err)
	}
	c := &confirmer{ch: ch, queue: queue, target: target, window: window}
	c.confirms = ch.NotifyPublish(make(chan amqp.Confirmation, window+1))
	c.returns = ch.NotifyReturn(make(chan amqp.Return, window+1))
	return c, nil
}

// outstanding counts the moves neither acknowledged nor given up.
func (c *confirmer) outstanding() int { return len(c.pending) + len(c.confirmed) }

// publish publishes the copy of the delivery tag to the target through
// the default exchange, persistent (the caller's copy says so) and
// mandatory. With a full window of publishes awaiting a confirm it first
// waits for one, at most timeout.
func (c *confirmer) publish(tag uint64, pub amqp.Publishing, timeout time.Duration) error {
	if c.failed {
		c.onGiveUp(tag)
		return nil
	}
	if len(c.pending) >= c.window {
		if err := c.await(timeout, c.window-1); err != nil {
			c.onGiveUp(tag)
			return err
		}
	}
	if err := c.ch.PublishWithContext(context.Background(), "", c.target, true, false, pub); err != nil {
		c.onGiveUp(tag)
		return c.fail(fmt.Errorf("publishing to queue %q: %w", c.target, err))
	}
	c.pending = append(c.pending, tag)
	return nil
}

// handle takes the confirm of the oldest publish awaiting one. A return
// reaches the client before the confirm of its publish, and the client
// queues it before it reads that confirm: a confirm read with no return
// queued confirms a routed copy.
func (c *confirmer) handle(cf amqp.Confirmation) error {
	if c.failed {
		return nil // given up already
	}
	c.seq++
	if len(c.pending) == 0 || cf.DeliveryTag != c.seq {
		return c.fail(fmt.Errorf("confirm %d came where %d was due", cf.DeliveryTag, c.seq))
	}
	select {
	case r := <-c.returns:
		return c.fail(fmt.Errorf("queue %q returned a moved message as unroutable (%s: does it still exist?); it and the moves in flight stay in queue %q",
			c.target, r.ReplyText, c.queue))
	default:
	}
	if !cf.Ack {
		return c.fail(fmt.Errorf("the broker did not confirm a move to queue %q; it stays in queue %q", c.target, c.queue))
	}
	c.confirmed = append(c.confirmed, c.pending[0])
	c.pending = c.pending[1:]
	if len(c.confirmed) >= ackEvery || len(c.pending) == 0 {
		return c.ack()
	}
	return nil
}

// await handles confirms until at most want publishes await one. Past
// timeout, or if the channel goes, the moves in flight are given up.
func (c *confirmer) await(timeout time.Duration, want int) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for !c.failed && len(c.pending) > want {
		select {
		case cf, ok := <-c.confirms:
			if !ok {
				return c.lost(errors.New("the channel closed before the broker confirmed the moves in flight"))
			}
			if err := c.handle(cf); err != nil {
				return err
			}
		case <-deadline.C:
			return c.fail(fmt.Errorf("the broker did not confirm %s to queue %q within %s; they stay in queue %q",
				count(len(c.pending), "move", "moves"), c.target, timeout, c.queue))
		}
	}
	return nil
}

// flush waits (at most timeout) for the confirms of every move in flight
// and acknowledges the confirmed ones.
func (c *confirmer) flush(timeout time.Duration) error {
	if err := c.await(timeout, 0); err != nil {
		return err
	}
	return c.ack()
}

// ack acknowledges the confirmed moves: with one ack with multiple set
// when they directly follow every acknowledged tag (delivery tags grow
// with delivery order, which is publish order, which is confirm order),
// one by one otherwise.
func (c *confirmer) ack() error {
	if c.failed || len(c.confirmed) == 0 {
		return nil
	}
	first, last := c.confirmed[0], c.confirmed[len(c.confirmed)-1]
	if first == c.ackedThrough+1 && last-first == uint64(len(c.confirmed)-1) {
		if err := c.ch.Ack(last, true); err != nil {
			return c.lost(fmt.Errorf("acking moved messages in queue %q: %w", c.queue, err))
		}
		c.ackedThrough = last
		c.acked(len(c.confirmed))
		return nil
	}
	for len(c.confirmed) > 0 {
		if err := c.ch.Ack(c.confirmed[0], false); err != nil {
			return c.lost(fmt.Errorf("acking a moved message in queue %q: %w", c.queue, err))
		}
		c.confirmed = c.confirmed[1:]
		c.onAck(1)
	}
	return nil
}

func (c *confirmer) acked(n int) {
	c.confirmed = c.confirmed[:0]
	c.onAck(n)
}

// fail stops the moves: the ones confirmed so far were confirmed with no
// return queued and are acknowledged; every other is given up. It
// returns cause.
func (c *confirmer) fail(cause error) error {
	if err := c.ack(); err != nil {
		return errors.Join(cause, err)
	}
	c.lost(nil)
	return cause
}

// lost gives up every move not yet acknowledged, and returns cause: the
// channel is gone, or one of them failed.
func (c *confirmer) lost(cause error) error {
	c.failed = true
	for _, tag := range c.confirmed {
		c.onGiveUp(tag)
	}
	for _, tag := range c.pending {
		c.onGiveUp(tag)
	}
	c.confirmed, c.pending = nil, nil
	return cause
}
