package retry

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
)

// nativeRoute is the route of a queue of the native layout (see
// contract's), which has no retry exchange and delays its retries inside
// itself.
type nativeRoute struct {
	queue string
	// schedule is the queue's; a Retrier's route holds the one it started
	// with, and Retrier.current the one in force.
	schedule *contract.Native
	// apart: the schedule is in the queue's schedule binding, not its
	// arguments, and may change while the helper runs.
	apart bool
	// login is the one the queue's AMQP 0.9.1 connection was dialed with,
	// for its AMQP 1.0 connections (see login); nil from New.
	login *login
	// draw picks a jittered delay from 0 to d; nil draws uniformly.
	draw func(d time.Duration) time.Duration
}

func (rt nativeRoute) queueName() string { return rt.queue }

// decide settles a delivery of the native queue, which delays its retries
// inside itself:
//
//   - nil acks; a cancelled handler requeues unchanged (basic.nack with
//     requeue, which RabbitMQ 4.3 neither counts nor delays);
//   - a permanent failure, or a failure of the schedule's last attempt,
//     goes to the DLQ through the dead-letter exchange, with its reason
//     and last error, as in the other layouts (the broker's delivery
//     limit stays the safety net);
//   - any other failure goes back into the queue as failed: on the reject
//     route by basic.reject, delayed by the queue's own linear schedule
//     (a RetryAfter too: the broker expresses no other delay there); on
//     the modified route by AMQP 1.0's modified outcome, held until now
//     plus the delay of the attempt it becomes (drawn with jitter if the
//     schedule says so), or a RetryAfter's delay.
//
// The attempt number is the broker's delivery count plus one.
func (rt nativeRoute) decide(d *amqp.Delivery, herr error, cancelled bool, now time.Time) decision {
	attempt := nativeAttempt(d)
	switch {
	case herr == nil:
		return decision{move: moveAck, attempt: attempt}
	case cancelled:
		return decision{move: moveRequeue, attempt: attempt, cause: herr}
	case errors.Is(herr, ErrReject):
		return rt.deadLetter(d, herr, contract.ReasonRejected, now)
	}
	return rt.retry(d, herr, now)
}

// retry returns d to the queue as failed for its next attempt, or, past
// the schedule's last, sends it to the DLQ as exhausted.
func (rt nativeRoute) retry(d *amqp.Delivery, herr error, now time.Time) decision {
	attempt := nativeAttempt(d)
	next := attempt + 1
	delay, ok := rt.schedule.Delay(next)
	if !ok {
		return rt.exhausted(d, herr, now)
	}
	if rt.schedule.Route == contract.RouteReject {
		return decision{move: moveReject, attempt: attempt, next: next, cause: herr, delay: delay, delayKnown: true}
	}
	var de *DelayError
	switch {
	case errors.As(herr, &de):
		delay = max(de.Delay, 0)
	case rt.schedule.Jitter:
		delay = rt.drawDelay(delay)
	}
	return decision{move: moveModify, attempt: attempt, next: next, cause: herr, deliverAt: now.Add(delay),
		delay: delay, delayKnown: true}
}

// exhausted sends d to the DLQ: its schedule is over.
func (rt nativeRoute) exhausted(d *amqp.Delivery, cause error, now time.Time) decision {
	return rt.deadLetter(d, cause, contract.ReasonExhausted, now)
}

// deadLetter is the exchange route's, through the queue's dead-letter
// exchange, for a queue whose deliveries carry their attempt in the
// broker's delivery count: the copy carries it in contract.HeaderAttempt,
// as DLQ copies of the other layouts do.
func (rt nativeRoute) deadLetter(d *amqp.Delivery, cause error, reason string, now time.Time) decision {
	dec := exchangeRoute{queue: rt.queue}.deadLetter(d, cause, reason, now)
	dec.attempt = nativeAttempt(d)
	dec.msg.Headers[contract.HeaderAttempt] = contract.AttemptValue(dec.attempt)
	return dec
}

// drawDelay draws a jittered delay from 0 to d.
func (rt nativeRoute) drawDelay(d time.Duration) time.Duration {
	if rt.draw != nil {
		return rt.draw(d)
	}
	if d <= 0 {
		return 0
	}
	return rand.N(d + 1)
}

// attemptOf is the attempt number of d: the broker's count.
func (rt nativeRoute) attemptOf(d *amqp.Delivery) (int, bool) { return nativeAttempt(d), true }

// unhonoured: the modified route holds a retry for the delay a RetryAfter
// asks; basic.reject carries none.
func (rt nativeRoute) unhonoured(dec decision) string {
	var de *DelayError
	if dec.move != moveReject || !errors.As(dec.cause, &de) {
		return ""
	}
	return fmt.Sprintf("the queue retries by basic.reject, which carries no delay: its own delay applies (%s before attempt %d); "+
		"a schedule that is not linear, or jitter, takes the AMQP 1.0 route, which honours RetryAfter", dec.delay, dec.next)
}

// number gives a delivery of the native queue the attempt header that
// other layouts' retries carry, from the broker's delivery count, so that
// a handler reads its attempt with Attempt whatever the layout. The
// header is the delivery's own copy: nothing is sent to the broker.
func (rt nativeRoute) number(d *amqp.Delivery) {
	h := make(amqp.Table, len(d.Headers)+1)
	for k, v := range d.Headers {
		h[k] = v
	}
	h[contract.HeaderAttempt] = contract.AttemptValue(nativeAttempt(d))
	d.Headers = h
}

// nativeAttempt is the attempt number of a delivery of a native queue:
// the broker's delivery count (contract.HeaderDeliveryCount, absent on a
// first delivery) plus one, or plus the message's contract.HeaderAttempt
// when it was moved here with retries behind it (contract.NativeAttempt).
//
// A delivery that is not redelivered has no count of the broker's: a
// quorum queue marks redelivered every delivery of a message it has
// handed out before (acquired count > 0, rabbit_fifo_client's
// add_delivery_count_header), and the failed deliveries it counts are
// some of those. An x-delivery-count on a first delivery was copied
// with the message from another queue (a shovel of a blue-green move
// copies a 3.x quorum queue's count of requeues; seen 3.10.8 → 4.3.6:
// attempt 2 on the first delivery from green) and is not this queue's.
func nativeAttempt(d *amqp.Delivery) int {
	if !d.Redelivered {
		return contract.NativeAttempt(d.Headers[contract.HeaderAttempt], 0)
	}
	n, _ := contract.Integer(d.Headers[contract.HeaderDeliveryCount])
	return contract.NativeAttempt(d.Headers[contract.HeaderAttempt], n)
}
