package retry

import (
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
)

// move is what settling does with a delivery.
type move int

const (
	// moveAck acks the delivery: its handler succeeded.
	moveAck move = iota + 1
	// moveRequeue nacks it with requeue, unchanged: its handler was
	// cancelled (a shutdown), which consumes no attempt.
	moveRequeue
	// moveRetry publishes the copy to exchange with key, and acks the
	// delivery once the broker confirmed it. A copy the broker returns
	// (no binding for its attempt) is exhausted: see route.exhausted.
	moveRetry
	// moveDeadLetter publishes the copy to the dead-letter exchange, and
	// acks the delivery once the broker confirmed it.
	moveDeadLetter
	// moveReject returns the delivery of a native queue to it as failed
	// (AMQP 0.9.1 basic.reject with requeue): the broker counts it and
	// holds it for the queue's own delay, min(min × count, max).
	moveReject
	// moveModify returns the delivery of a native queue to it as failed
	// over AMQP 1.0 (the modified outcome, delivery-failed), held until
	// deliverAt (contract.AnnotationDeliveryTime).
	moveModify
)

// decision is how one delivery is settled: the move, and for a copy where
// it goes and what it carries. route.decide makes it without a broker.
type decision struct {
	move     move
	exchange string
	key      string
	msg      amqp.Publishing // the copy, for moveRetry and moveDeadLetter
	attempt  int             // of the delivery; 0 if its header is malformed
	next     int             // of the copy, for moveRetry
	reason   string          // for moveDeadLetter: a contract.Reason* value
	cause    error           // the handler's error
	// deliverAt is when the broker delivers a moveModify's delivery
	// again.
	deliverAt time.Time
	// delay is a retry's delay when the helper chose or knows it
	// (delayKnown): through the delay ladder, or on a native queue.
	delay      time.Duration
	delayKnown bool
}

// route is what a Retrier knows of its queue's topology: all a decision
// needs besides the delivery. A queue retries through its retry exchange
// (exchangeRoute) or inside itself (nativeRoute, decide_native.go).
type route interface {
	// queueName is the work queue's.
	queueName() string
	// decide settles d by its handler's result herr.
	decide(d *amqp.Delivery, herr error, cancelled bool, now time.Time) decision
	// retry is the next attempt of d, failed with cause (Retrier.Retry).
	retry(d *amqp.Delivery, cause error, now time.Time) decision
	// deadLetter sends d to the DLQ with reason.
	deadLetter(d *amqp.Delivery, cause error, reason string, now time.Time) decision
	// exhausted is the decision once d's schedule is over.
	exhausted(d *amqp.Delivery, cause error, now time.Time) decision
	// attemptOf is the attempt number of d (ok false if malformed).
	attemptOf(d *amqp.Delivery) (int, bool)
	// number gives d the attempt header a handler reads, where the
	// route numbers attempts otherwise.
	number(d *amqp.Delivery)
	// unhonoured says why dec's retry cannot wait the delay its handler
	// asked for with RetryAfter, and what it waits instead; "" if it does.
	unhonoured(dec decision) string
}

// exchangeRoute is the route of a queue that retries through its retry
// exchange: into wait queues (with a return queue, or not) or the delay
// ladder.
type exchangeRoute struct {
	queue  string
	back   string  // the return queue, "" if none
	levels *levels // the delay ladder (WithLevels), nil if none
}

func (rt exchangeRoute) queueName() string { return rt.queue }

// attemptOf reads contract.HeaderAttempt.
func (rt exchangeRoute) attemptOf(d *amqp.Delivery) (int, bool) { return Attempt(*d) }

// number does nothing: the retry copies carry their attempt.
func (rt exchangeRoute) number(*amqp.Delivery) {}

// decide settles d by its handler's result herr: nil acks; cancelled (the
// handler's own context was cancelled) requeues unchanged; an error that
// errors.Is ErrReject dead-letters with ReasonRejected; any other error
// retries (see retry).
func (rt exchangeRoute) decide(d *amqp.Delivery, herr error, cancelled bool, now time.Time) decision {
	attempt, _ := Attempt(*d)
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

// retry is the next attempt of d, through the retry exchange; or, when
// no next attempt can be numbered (a malformed attempt header, or one at
// contract.MaxAttempt), the DLQ.
func (rt exchangeRoute) retry(d *amqp.Delivery, cause error, now time.Time) decision {
	prev, ok := Attempt(*d)
	if !ok {
		return rt.deadLetter(d, cause, ReasonMalformedAttempt, now)
	}
	next := prev + 1
	if next > contract.MaxAttempt {
		return rt.deadLetter(d, cause, contract.ReasonExhausted, now)
	}
	msg := republishing(d, cause, now)
	msg.Headers[contract.HeaderAttempt] = contract.AttemptValue(next)
	// A reason from an earlier trip to the DLQ (before a replay) does not
	// belong to a retry.
	delete(msg.Headers, contract.HeaderDeadLetterReason)
	// Ahead of the backlog of a 4.0+ quorum queue, to every consumer.
	msg.Priority = contract.RetryPriorityOf(msg.Priority)
	key, delay, known := rt.retryKey(prev, cause)
	return decision{move: moveRetry, exchange: contract.RetryExchange(rt.queue), key: key,
		msg: msg, attempt: prev, next: next, cause: cause, delay: delay, delayKnown: known}
}

// exhausted is the decision after the retry exchange returned d's retry
// copy: no binding for its attempt, so the schedule is over.
func (rt exchangeRoute) exhausted(d *amqp.Delivery, cause error, now time.Time) decision {
	return rt.deadLetter(d, cause, contract.ReasonExhausted, now)
}

// deadLetter sends d to the DLX with reason, keeping its attempt header
// (the attempt that failed last).
func (rt exchangeRoute) deadLetter(d *amqp.Delivery, cause error, reason string, now time.Time) decision {
	attempt, _ := Attempt(*d)
	msg := republishing(d, cause, now)
	msg.Headers[contract.HeaderDeadLetterReason] = reason
	return decision{move: moveDeadLetter, exchange: contract.DeadLetterExchange(rt.queue), key: rt.queue,
		msg: msg, attempt: attempt, reason: reason, cause: cause}
}

// retryKey is the routing key of retry n of the queue's delivery: the
// queue's name (its return queue's, if it has one), or, through a ladder,
// the delay's bits and the name, with the delay chosen (known true).
func (rt exchangeRoute) retryKey(n int, cause error) (key string, delay time.Duration, known bool) {
	l := rt.levels
	if l == nil && rt.back != "" {
		return rt.back, 0, false // a shared wait queue returns by this key
	}
	if l == nil {
		return rt.queue, 0, false
	}
	d := l.backoff(n)
	var de *DelayError
	if errors.As(cause, &de) {
		d = de.Delay
	}
	d = min(max(d, 0), l.ladder.MaxDelay())
	key, _ = l.ladder.RoutingKey(d, rt.queue) // d is in range
	return key, d, true
}

// unhonoured says why dec's retry cannot wait the delay its handler asked
// for with RetryAfter (a *DelayError), and what it waits instead: "" when
// it waits that delay, or the handler asked for none, or dec is no retry.
// Only the delay ladder carries a delay chosen per message here; wait
// queues' TTLs set theirs.
func (rt exchangeRoute) unhonoured(dec decision) string {
	var de *DelayError
	if !errors.As(dec.cause, &de) {
		return ""
	}
	switch {
	case dec.move != moveRetry:
		return ""
	case rt.levels == nil:
		return "the retry waits in a wait queue, whose TTL (the spec's schedule) sets the delay; layout levels or native honours RetryAfter"
	case de.Delay > dec.delay:
		return fmt.Sprintf("the delay ladder's maximum, %s, applies", dec.delay)
	}
	return ""
}
