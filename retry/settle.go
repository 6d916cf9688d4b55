package retry

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
)

// result is what settling did: the outcome, the dead-letter reason, and
// the settling error.
type result struct {
	outcome Outcome
	reason  string
	err     error
	// delay is a Retried outcome's delay, when known (delayKnown).
	delay      time.Duration
	delayKnown bool
}

// Handle wraps h: the returned function runs h on a delivery, recovering a
// panic as an error, and settles the delivery by h's result (see Settle).
// Settling ignores the cancellation of ctx, so that stopping a consumer
// does not abandon a retry half-way; it is bounded by the confirm timeout.
func (r *Retrier) Handle(h Handler) func(ctx context.Context, d amqp.Delivery) (Outcome, error) {
	return func(ctx context.Context, d amqp.Delivery) (Outcome, error) {
		start := time.Now()
		hctx, tr := r.begin(ctx, &d)
		err := r.run(hctx, h, d)
		return r.settle(ctx, d, err, time.Since(start), tr)
	}
}

// run runs h on d (numbered, on a native queue: nativeRoute.number), recovering
// a panic as an error.
func (r *Retrier) run(ctx context.Context, h Handler, d amqp.Delivery) (err error) {
	r.route.number(&d)
	defer func() {
		if v := recover(); v != nil {
			r.log.Error("retry: handler panicked", "message_id", d.MessageId, "panic", v, "stack", string(debug.Stack()))
			err = fmt.Errorf("handler panicked: %v", v)
		}
	}()
	return h(ctx, d)
}

// Settle settles d by a handler's result err: nil acks it; an error that
// is ctx's own cancellation (the service is stopping) requeues d unchanged,
// consuming no attempt; an error that errors.Is ErrReject dead-letters it
// (Reject); any other error retries it (Retry). The error returned is about
// settling, not err: nil means d is where the Outcome says.
func (r *Retrier) Settle(ctx context.Context, d amqp.Delivery, err error) (Outcome, error) {
	return r.settle(ctx, d, err, 0, nil)
}

// settle settles d by its handler's error herr, and tells the observers
// and tr (nil if untraced) what became of it.
func (r *Retrier) settle(ctx context.Context, d amqp.Delivery, herr error, took time.Duration, tr DeliveryTrace) (Outcome, error) {
	rt := r.current()
	dec := rt.decide(&d, herr, cancelled(ctx, herr), r.now())
	r.warnUnhonoured(rt, dec)
	s := r.report(d, r.carryOut(context.WithoutCancel(ctx), d, dec, tr), took)
	if tr != nil {
		tr.End(s, herr)
	}
	return s.Outcome, s.Err
}

// current is the route with the native schedule in force.
func (r *Retrier) current() route {
	if n, ok := r.route.(nativeRoute); ok {
		n.schedule = r.schedule.Load()
		return n
	}
	return r.route
}

// native is r's route if its queue is native.
func (r *Retrier) native() (nativeRoute, bool) {
	n, ok := r.route.(nativeRoute)
	return n, ok
}

// returnQueue is the queue's return queue, "" if it has none.
func (r *Retrier) returnQueue() string {
	if e, ok := r.route.(exchangeRoute); ok {
		return e.back
	}
	return ""
}

// carryOut does what dec decided for d; tr, if set, is told of the copy
// published.
func (r *Retrier) carryOut(ctx context.Context, d amqp.Delivery, dec decision, tr DeliveryTrace) result {
	switch dec.move {
	case moveAck:
		return r.ack(d)
	case moveRequeue:
		return r.requeueUnchanged(d, dec)
	case moveRetry:
		return r.retry(ctx, d, dec, tr)
	case moveReject, moveModify:
		return r.returnFailed(d, dec, tr)
	}
	return r.deadLetter(ctx, d, dec, tr)
}

// modifier is the acknowledger of a delivery received over AMQP 1.0,
// which can return it to its queue as failed, held until a time.
type modifier interface {
	// Modify holds the delivery until deliverAt, with the message
	// annotations ann added (each named x-...; the broker keeps those).
	Modify(deliverAt time.Time, ann map[string]any) error
}

// returnFailed gives a delivery of a native queue back to it as failed,
// so that the broker counts it and holds it for its delay: by
// basic.reject with requeue (the queue's own delay), or by the modified
// outcome held until dec.deliverAt, annotated with the time it first
// failed and what tr carries on. If that fails, the broker delivers it
// again when its channel or link closes: the attempt is not lost.
func (r *Retrier) returnFailed(d amqp.Delivery, dec decision, tr DeliveryTrace) result {
	var err error
	if m, ok := d.Acknowledger.(modifier); ok && dec.move == moveModify {
		err = m.Modify(dec.deliverAt, modifyAnnotations(d, tr, time.Now()))
	} else if dec.move == moveModify {
		// New refuses such a Retrier; requeue rather than hold the delivery.
		return r.requeue(d, fmt.Errorf("retry: message %q came over AMQP 0.9.1, which cannot hold it until a time", d.MessageId))
	} else {
		err = d.Reject(true)
	}
	if err != nil {
		return result{outcome: Requeued, err: fmt.Errorf("retry: returning message %q to its queue for attempt %d: %w", d.MessageId, dec.next, err)}
	}
	r.obs.Retried(r.route.queueName(), dec.next)
	r.log.Debug("retry: message returned to its queue for a retry", "message_id", d.MessageId, "attempt", dec.attempt, "next_attempt", dec.next, "error", errorText(dec.cause))
	return result{outcome: Retried, delay: dec.delay, delayKnown: dec.delayKnown}
}

// modifyAnnotations are the message annotations a modified retry of d
// adds: the time it first failed (once), and the headers tr would give a
// copy, each under an x- name, because the broker keeps only annotations
// so named (they come back as headers of that name).
func modifyAnnotations(d amqp.Delivery, tr DeliveryTrace, now time.Time) map[string]any {
	ann := map[string]any{}
	if ff := firstFailureToAdd(d, now); ff != "" {
		ann[contract.AnnotationFirstFailure] = ff
	}
	if tr == nil {
		return ann
	}
	carried := amqp.Table{}
	tr.Publishing(carried)
	for k, v := range carried {
		if !strings.HasPrefix(k, "x-") {
			k = "x-" + k
		}
		ann[k] = v
	}
	return ann
}

// cancelled reports whether a handler's error is its own context being
// cancelled: the handler was stopped, it did not fail. A deadline is a
// failure like any other.
func cancelled(ctx context.Context, err error) bool {
	return errors.Is(ctx.Err(), context.Canceled) && errors.Is(err, context.Canceled)
}

// report tells the observers about a settled delivery and returns what
// it told them.
func (r *Retrier) report(d amqp.Delivery, res result, took time.Duration) Settlement {
	attempt, _ := r.route.attemptOf(&d)
	s := Settlement{
		Queue: r.route.queueName(), MessageID: d.MessageId, Attempt: attempt,
		Outcome: res.outcome, Reason: res.reason, Delay: res.delay, DelayKnown: res.delayKnown,
		Handled: took, Err: res.err,
	}
	r.obs.Settled(s)
	return s
}

// reported is report's outcome and error, for the exported settling
// methods.
func (r *Retrier) reported(d amqp.Delivery, res result) (Outcome, error) {
	s := r.report(d, res, 0)
	return s.Outcome, s.Err
}

// Ack acknowledges d: it was handled.
func (r *Retrier) Ack(d amqp.Delivery) error {
	_, err := r.reported(d, r.ack(d))
	return err
}

func (r *Retrier) ack(d amqp.Delivery) result {
	if err := d.Ack(false); err != nil {
		return result{outcome: Acked, err: fmt.Errorf("retry: acking message %q: %w", d.MessageId, err)}
	}
	return result{outcome: Acked}
}

// Retry republishes d to the queue's retry exchange as the next attempt,
// with cause as its last error, and acks d once the broker confirmed. The
// topology decides when it comes back. When the retry exchange returns the
// copy (no binding for that attempt: the schedule is exhausted), d goes to
// the DLQ with reason contract.ReasonExhausted instead (Outcome
// DeadLettered), as does a delivery with a malformed attempt header
// (ReasonMalformedAttempt) or one at contract.MaxAttempt.
//
// On a nil error, d is settled as the Outcome says. On an error, the copy
// was not confirmed and d was nacked with requeue (Requeued), or the ack
// failed after the copy was confirmed, in which case the broker will
// deliver d again as well.
func (r *Retrier) Retry(ctx context.Context, d amqp.Delivery, cause error) (Outcome, error) {
	rt := r.current()
	dec := rt.retry(&d, cause, r.now())
	r.warnUnhonoured(rt, dec)
	return r.reported(d, r.carryOut(ctx, d, dec, nil))
}

// warnUnhonoured logs, once per queue, a RetryAfter that rt cannot honour
// (route.unhonoured): the retry comes back at another time than the
// handler asked, which nothing else would tell its author. Once, because
// every later RetryAfter fares the same, and a service that returns one
// per message would flood its log.
func (r *Retrier) warnUnhonoured(rt route, dec decision) {
	why := rt.unhonoured(dec)
	if why == "" || r.warned.Swap(true) {
		return
	}
	var de *DelayError
	errors.As(dec.cause, &de)
	r.log.Warn("retry: a handler's RetryAfter cannot be honoured on this queue (logged once)",
		"requested", de.Delay, "why", why)
}

// retry publishes dec's retry copy and acks d once the broker confirmed
// it; a copy the retry exchange returned sends d to the DLQ as exhausted.
func (r *Retrier) retry(ctx context.Context, d amqp.Delivery, dec decision, tr DeliveryTrace) result {
	publishing(tr, &dec.msg)
	res := r.pub.publish(ctx, dec.exchange, dec.key, dec.msg)
	switch {
	case res.err != nil:
		return r.requeue(d, fmt.Errorf("retry: publishing attempt %d of message %q: %w", dec.next, d.MessageId, res.err))
	case !res.acked:
		return r.requeue(d, fmt.Errorf("retry: broker nacked attempt %d of message %q", dec.next, d.MessageId))
	case res.returned:
		// No binding for attempt next: the schedule in the topology is
		// over. The original is still unacked, so nothing is lost if the
		// dead-letter copy fails in turn.
		return r.deadLetter(ctx, d, r.route.exhausted(&d, dec.cause, r.now()), tr)
	}
	r.obs.Retried(r.route.queueName(), dec.next)
	r.log.Debug("retry: message retried", "message_id", d.MessageId, "attempt", dec.attempt, "next_attempt", dec.next, "error", errorText(dec.cause))
	if err := d.Ack(false); err != nil {
		return result{outcome: Retried, delay: dec.delay, delayKnown: dec.delayKnown, err: fmt.Errorf("retry: acking message %q after its attempt %d was confirmed (it will be delivered again): %w", d.MessageId, dec.next, err)}
	}
	return result{outcome: Retried, delay: dec.delay, delayKnown: dec.delayKnown}
}

// Reject sends d to the queue's DLQ with reason contract.ReasonRejected and
// cause as its last error, and acks d once the broker confirmed. Errors are
// as for Retry.
func (r *Retrier) Reject(ctx context.Context, d amqp.Delivery, cause error) (Outcome, error) {
	return r.reported(d, r.deadLetter(ctx, d, r.current().deadLetter(&d, cause, contract.ReasonRejected, r.now()), nil))
}

// deadLetter publishes dec's copy to the DLX and acks d once confirmed.
func (r *Retrier) deadLetter(ctx context.Context, d amqp.Delivery, dec decision, tr DeliveryTrace) result {
	publishing(tr, &dec.msg)
	res := r.pub.publish(ctx, dec.exchange, dec.key, dec.msg)
	switch {
	case res.err != nil:
		return r.requeue(d, fmt.Errorf("retry: publishing message %q to the dead-letter exchange %q: %w", d.MessageId, dec.exchange, res.err))
	case !res.acked:
		return r.requeue(d, fmt.Errorf("retry: broker nacked message %q sent to the dead-letter exchange %q", d.MessageId, dec.exchange))
	case res.returned:
		return r.requeue(d, fmt.Errorf("retry: dead-letter exchange %q could not route message %q (is its DLQ bound? run `rmqtopo apply`)", dec.exchange, d.MessageId))
	}
	r.obs.DeadLettered(r.route.queueName(), dec.reason)
	r.log.Warn("retry: message dead-lettered", "message_id", d.MessageId, "attempt", dec.attempt, "reason", dec.reason, "error", errorText(dec.cause))
	if err := d.Ack(false); err != nil {
		return result{outcome: DeadLettered, reason: dec.reason, err: fmt.Errorf("retry: acking message %q after its dead-letter copy was confirmed (it will be delivered again): %w", d.MessageId, err)}
	}
	return result{outcome: DeadLettered, reason: dec.reason}
}

// requeue nacks d with requeue after a failed publish, so it is not lost.
func (r *Retrier) requeue(d amqp.Delivery, cause error) result {
	r.log.Error("retry: could not republish the message; requeueing it", "message_id", d.MessageId, "error", cause)
	if err := d.Nack(false, true); err != nil {
		return result{outcome: Requeued, err: fmt.Errorf("%w; nack with requeue failed too (the broker redelivers it when the channel closes): %v", cause, err)}
	}
	return result{outcome: Requeued, err: cause}
}

// giveBack requeues d unchanged without running its handler: Consume is
// stopping and d was prefetched but not started.
func (r *Retrier) giveBack(d amqp.Delivery) {
	res := result{outcome: Requeued}
	if err := d.Nack(false, true); err != nil {
		res.err = fmt.Errorf("retry: requeueing message %q at shutdown (the broker redelivers it when the channel closes): %w", d.MessageId, err)
	}
	r.report(d, res, 0)
}

// requeueUnchanged gives d back to the broker as it came, after its
// handler was cancelled: the same attempt is delivered again.
func (r *Retrier) requeueUnchanged(d amqp.Delivery, dec decision) result {
	r.log.Info("retry: handler cancelled; requeueing the message unchanged", "message_id", d.MessageId, "attempt", dec.attempt, "error", dec.cause)
	if err := d.Nack(false, true); err != nil {
		return result{outcome: Requeued, err: fmt.Errorf("retry: requeueing message %q after its handler was cancelled (the broker redelivers it when the channel closes): %w", d.MessageId, err)}
	}
	return result{outcome: Requeued}
}
