package retry

import (
	"errors"
	"math/rand/v2"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
)

// decideNative settles a delivery of a native queue (see contract's
// native layout), which delays its retries inside itself:
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
func (rt route) decideNative(d *amqp.Delivery, herr error, cancelled bool, now time.Time) decision {
	attempt := nativeAttempt(d)
	switch {
	case herr == nil:
		return decision{move: moveAck, attempt: attempt}
	case cancelled:
		return decision{move: moveRequeue, attempt: attempt, cause: herr}
	case errors.Is(herr, ErrReject):
		return rt.nativeDeadLetter(d, herr, contract.ReasonRejected, now)
	}
	next := attempt + 1
	delay, ok := rt.native.Delay(next)
	if !ok {
		return rt.nativeDeadLetter(d, herr, contract.ReasonExhausted, now)
	}
	if rt.native.Route == contract.RouteReject {
		return decision{move: moveReject, attempt: attempt, next: next, cause: herr, delay: delay, delayKnown: true}
	}
	var de *DelayError
	switch {
	case errors.As(herr, &de):
		delay = max(de.Delay, 0)
	case rt.native.Jitter:
		delay = rt.drawDelay(delay)
	}
	return decision{move: moveModify, attempt: attempt, next: next, cause: herr, deliverAt: now.Add(delay),
		delay: delay, delayKnown: true}
}

// nativeDeadLetter is deadLetter for a native queue, whose deliveries
// carry their attempt in the broker's delivery count: the copy carries it
// in contract.HeaderAttempt, as DLQ copies of the other layouts do.
func (rt route) nativeDeadLetter(d *amqp.Delivery, cause error, reason string, now time.Time) decision {
	dec := rt.deadLetter(d, cause, reason, now)
	dec.attempt = nativeAttempt(d)
	dec.msg.Headers[contract.HeaderAttempt] = contract.AttemptValue(dec.attempt)
	return dec
}

// drawDelay draws a jittered delay from 0 to d.
func (rt route) drawDelay(d time.Duration) time.Duration {
	if rt.draw != nil {
		return rt.draw(d)
	}
	if d <= 0 {
		return 0
	}
	return rand.N(d + 1)
}

// attemptOf is the attempt number of d on this route: the broker's count
// on a native queue, contract.HeaderAttempt elsewhere (ok false if
// malformed).
func (rt route) attemptOf(d *amqp.Delivery) (int, bool) {
	if rt.native != nil {
		return nativeAttempt(d), true
	}
	return Attempt(*d)
}

// numberNative gives a delivery of a native queue the attempt header that
// other layouts' retries carry, from the broker's delivery count, so that
// a handler reads its attempt with Attempt whatever the layout. The
// header is the delivery's own copy: nothing is sent to the broker.
func (rt route) numberNative(d *amqp.Delivery) {
	if rt.native == nil {
		return
	}
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
	var n int64
	if !d.Redelivered {
		return contract.NativeAttempt(d.Headers[contract.HeaderAttempt], 0)
	}
	switch v := d.Headers[contract.HeaderDeliveryCount].(type) {
	case int64:
		n = v
	case int32:
		n = int64(v)
	case int16:
		n = int64(v)
	case int8:
		n = int64(v)
	case int:
		n = int64(v)
	case uint8:
		n = int64(v)
	case uint16:
		n = int64(v)
	case uint32:
		n = int64(v)
	}
	return contract.NativeAttempt(d.Headers[contract.HeaderAttempt], n)
}
