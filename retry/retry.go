// Package retry turns a message handler's error into the right move through
// the retry topology that rmqtopo provisioned: retry later, or dead-letter.
//
// A service knows only its work queue. The delays and the number of retries
// live in the topology (see package contract): the helper republishes a
// failed delivery to the queue's retry exchange with the next attempt
// number, and the exchange routes it to the right wait queue, back to the
// queue at once, or, past the last retry, to the DLQ.
//
//	r, err := retry.New(conn, "orders.created") // checks the topology exists
//	...
//	process := r.Handle(func(ctx context.Context, d amqp.Delivery) error {
//		if bad(d) {
//			return retry.Permanent(errors.New("malformed order")) // straight to the DLQ
//		}
//		return handle(ctx, d) // nil: ack; an error: retry later
//	})
//	for d := range deliveries { // consumed with autoAck=false
//		process(ctx, d)
//	}
//
// # Guarantees
//
// Delivery is at-least-once, never at-most-once. A retry or dead-letter copy
// is published with mandatory=true on a separate channel in confirm mode,
// and the original delivery is acked only after the broker confirmed the
// copy. If the broker nacks the copy, returns it, or the channel closes
// before it confirms, the original is nacked with requeue and comes back:
// the message is never lost and its attempt is counted once per copy that
// exists. A crash between the confirmation and the ack leaves both the copy
// and the unacked original, which the broker redelivers: one duplicate,
// never a loss. Handlers must therefore be idempotent.
//
// A copy that the retry exchange cannot route (the topology lost a binding
// and the alternate exchange) is returned by the broker and sent to the DLQ
// instead, with contract.HeaderDeadLetterReason set to
// contract.ReasonUnroutable.
//
// A handler's error is classified: nil acks; an error that errors.Is
// ErrReject (see Permanent) goes to the DLQ at once with reason
// contract.ReasonRejected; any other error, or a panic, is retried. A
// delivery whose attempt header is malformed (unparseable, negative, absurdly
// large, or of a wrong AMQP type) is still handed to the handler; if that
// fails it goes to the DLQ with reason ReasonMalformedAttempt rather than
// loop.
//
// A Retrier is safe for concurrent use by any number of handlers (consumer
// prefetch above one). They share one confirm-mode channel: each handler
// publishes and waits only for its own confirmation, which the connection's
// reader matches to it by delivery tag, so confirmations are pipelined. If
// the broker or the network closes that channel, the next publish opens a
// new one.
//
// A Retrier publishes with the connection it is given; it does not reconnect
// a closed connection. Services that reconnect create a new Retrier on the
// new connection.
package retry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
)

// ReasonMalformedAttempt is the dead-letter reason of a delivery whose
// attempt header could not be read; see contract.ReasonMalformedAttempt.
const ReasonMalformedAttempt = contract.ReasonMalformedAttempt

// ErrReject marks a failure as permanent: a delivery whose handler error
// errors.Is ErrReject goes to the DLQ without retries. Wrap it
// (fmt.Errorf("bad payload: %w", retry.ErrReject)) or use Permanent.
var ErrReject = errors.New("permanent failure")

// Permanent returns err marked as permanent: errors.Is(Permanent(err),
// ErrReject) is true, and errors.Is and errors.As still see err. Permanent
// of nil is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string   { return e.err.Error() }
func (e *permanentError) Unwrap() []error { return []error{e.err, ErrReject} }

// Handler processes one delivery. Its error decides what happens to it:
// nil acks, an error wrapping ErrReject dead-letters, any other error
// retries.
type Handler func(ctx context.Context, d amqp.Delivery) error

// Outcome is what became of a delivery.
type Outcome int

const (
	// Acked: the handler succeeded and the delivery was acked.
	Acked Outcome = iota + 1
	// Retried: a copy with the next attempt number was confirmed by the
	// retry exchange (which dead-letters it if that attempt is past the
	// schedule), and the delivery was acked.
	Retried
	// DeadLettered: a copy was confirmed by the dead-letter exchange, and
	// the delivery was acked.
	DeadLettered
	// Requeued: the copy could not be confirmed, so the delivery was nacked
	// with requeue; the broker delivers it again.
	Requeued
)

// String returns "ack", "retry", "dead-letter" or "requeue".
func (o Outcome) String() string {
	switch o {
	case Acked:
		return "ack"
	case Retried:
		return "retry"
	case DeadLettered:
		return "dead-letter"
	case Requeued:
		return "requeue"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Observer is told about retries and dead-letters, to count them. Its
// methods are called after the broker confirmed the copy and before the
// original is acked, from the handler's goroutine: they must be quick and
// safe for concurrent use.
type Observer interface {
	// Retried reports a delivery republished as retry number attempt (1
	// for the first retry).
	Retried(queue string, attempt int)
	// DeadLettered reports a delivery sent to the DLQ by the helper, with
	// the reason in its contract.HeaderDeadLetterReason: one of
	// contract.ReasonRejected, contract.ReasonUnroutable,
	// contract.ReasonExhausted or ReasonMalformedAttempt. Messages the retry
	// exchange dead-letters after the last retry are not seen here: the
	// broker routes them, reported as Retried.
	DeadLettered(queue, reason string)
}

// Option configures a Retrier.
type Option func(*options)

type options struct {
	log            *slog.Logger
	obs            Observer
	confirmTimeout time.Duration
	levels         *levels // WithLevels (delay.go)
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

// WithObserver sets the observer of retries and dead-letters.
func WithObserver(obs Observer) Option { return func(o *options) { o.obs = obs } }

// WithConfirmTimeout bounds the wait for the broker's confirmation of a
// copy (default 30s). On timeout the original is nacked with requeue.
func WithConfirmTimeout(d time.Duration) Option { return func(o *options) { o.confirmTimeout = d } }

// Retrier settles the deliveries of one work queue.
type Retrier struct {
	queue string
	log   *slog.Logger
	obs   Observer
	pub   *publisher
	now   func() time.Time
	// levels, if set, routes delayed retries through a delay ladder.
	levels *levels
}

// New returns a Retrier for the deliveries of queue, publishing over conn.
// It first checks, with passive declares on a throwaway channel, that the
// queue's retry exchange, dead-letter exchange and DLQ exist, and fails
// with an error saying to run `rmqtopo apply` if not.
func New(conn *amqp.Connection, queue string, opts ...Option) (*Retrier, error) {
	if conn == nil {
		return nil, errors.New("retry: nil connection")
	}
	if queue == "" {
		return nil, errors.New("retry: empty queue name")
	}
	o := options{log: slog.Default(), confirmTimeout: 30 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	if err := checkTopology(conn, queue); err != nil {
		return nil, err
	}
	if err := o.levels.check(conn, queue); err != nil {
		return nil, err
	}
	return &Retrier{
		queue:  queue,
		log:    o.log.With("queue", queue),
		obs:    o.obs,
		pub:    newPublisher(conn, o.log, o.confirmTimeout),
		now:    time.Now,
		levels: o.levels,
	}, nil
}

// checkTopology passively declares what the helper publishes to. A failed
// passive declare closes its channel, which is why it gets one of its own.
func checkTopology(conn *amqp.Connection, queue string) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("retry: opening a channel to check the topology of queue %q: %w", queue, err)
	}
	defer ch.Close()
	missing := func(kind, name string, err error) error {
		var aerr *amqp.Error
		if errors.As(err, &aerr) && aerr.Code == amqp.NotFound {
			return fmt.Errorf("retry: queue %q has no %s %q: run `rmqtopo apply` with its spec to provision the retry topology", queue, kind, name)
		}
		return fmt.Errorf("retry: checking the %s %q of queue %q (is the topology provisioned? run `rmqtopo apply`): %w", kind, name, queue, err)
	}
	for _, e := range []struct{ name, kind string }{
		{contract.RetryExchange(queue), "headers"},
		{contract.DeadLetterExchange(queue), "fanout"},
	} {
		if err := ch.ExchangeDeclarePassive(e.name, e.kind, true, false, false, false, nil); err != nil {
			return missing("retry exchange", e.name, err)
		}
	}
	dlq := contract.DeadLetterQueue(queue)
	if _, err := ch.QueueDeclarePassive(dlq, true, false, false, false, nil); err != nil {
		return missing("dead-letter queue", dlq, err)
	}
	return nil
}

// Close closes the Retrier's publish channel. Call it after the handlers
// have returned; a settle still waiting for a confirmation then requeues
// its delivery. It does not close the connection.
func (r *Retrier) Close() error {
	if err := r.pub.close(); err != nil {
		return fmt.Errorf("retry: closing the publish channel: %w", err)
	}
	return nil
}

// Attempt returns the retry number of d: 0 for a first delivery, 1 for
// the first retry. ok is false if the attempt header is malformed.
func Attempt(d amqp.Delivery) (attempt int, ok bool) {
	return contract.ParseAttempt(d.Headers[contract.HeaderAttempt])
}

// Handle wraps h: the returned function runs h on a delivery, recovering a
// panic as an error, and settles the delivery by h's result (see Settle).
// Settling ignores the cancellation of ctx, so that stopping a consumer
// does not abandon a retry half-way; it is bounded by the confirm timeout.
func (r *Retrier) Handle(h Handler) func(ctx context.Context, d amqp.Delivery) (Outcome, error) {
	return func(ctx context.Context, d amqp.Delivery) (Outcome, error) {
		err := r.run(ctx, h, d)
		return r.Settle(context.WithoutCancel(ctx), d, err)
	}
}

func (r *Retrier) run(ctx context.Context, h Handler, d amqp.Delivery) (err error) {
	defer func() {
		if v := recover(); v != nil {
			r.log.Error("retry: handler panicked", "message_id", d.MessageId, "panic", v, "stack", string(debug.Stack()))
			err = fmt.Errorf("handler panicked: %v", v)
		}
	}()
	return h(ctx, d)
}

// Settle settles d by a handler's result err: nil acks it, an error that
// errors.Is ErrReject rejects it (Reject), any other error retries it
// (Retry). The error returned is about settling, not err: nil means d is
// where the Outcome says.
func (r *Retrier) Settle(ctx context.Context, d amqp.Delivery, err error) (Outcome, error) {
	switch {
	case err == nil:
		if aerr := r.Ack(d); aerr != nil {
			return Acked, aerr
		}
		return Acked, nil
	case errors.Is(err, ErrReject):
		return r.Reject(ctx, d, err)
	default:
		return r.Retry(ctx, d, err)
	}
}

// Ack acknowledges d: it was handled.
func (r *Retrier) Ack(d amqp.Delivery) error {
	if err := d.Ack(false); err != nil {
		return fmt.Errorf("retry: acking message %q: %w", d.MessageId, err)
	}
	return nil
}

// Retry republishes d to the queue's retry exchange as the next attempt,
// with cause as its last error, and acks d once the broker confirmed. The
// topology decides when it comes back, or that it goes to the DLQ. A
// delivery with a malformed attempt header, or one past contract.MaxAttempt,
// goes to the DLQ instead (Outcome DeadLettered), as does a copy the retry
// exchange returns as unroutable.
//
// On a nil error, d is settled as the Outcome says. On an error, the copy
// was not confirmed and d was nacked with requeue (Requeued), or the ack
// failed after the copy was confirmed, in which case the broker will
// deliver d again as well.
func (r *Retrier) Retry(ctx context.Context, d amqp.Delivery, cause error) (Outcome, error) {
	prev, ok := Attempt(d)
	if !ok {
		return r.deadLetter(ctx, d, cause, ReasonMalformedAttempt)
	}
	next := prev + 1
	if next > contract.MaxAttempt {
		return r.deadLetter(ctx, d, cause, contract.ReasonExhausted)
	}
	msg := republishing(&d, cause, r.now())
	msg.Headers[contract.HeaderAttempt] = contract.AttemptValue(next)
	// A reason from an earlier trip to the DLQ (before a replay) would be
	// wrong if the retry exchange dead-letters this copy as exhausted.
	delete(msg.Headers, contract.HeaderDeadLetterReason)

	res := r.pub.publish(ctx, contract.RetryExchange(r.queue), r.retryKey(next, cause), msg)
	switch {
	case res.err != nil:
		return r.requeue(d, fmt.Errorf("retry: publishing retry %d of message %q: %w", next, d.MessageId, res.err))
	case !res.acked:
		return r.requeue(d, fmt.Errorf("retry: broker nacked retry %d of message %q", next, d.MessageId))
	case res.returned:
		r.log.Warn("retry: retry exchange could not route the message; sending it to the DLQ",
			"exchange", contract.RetryExchange(r.queue), "message_id", d.MessageId, "attempt", next)
		return r.deadLetter(ctx, d, cause, contract.ReasonUnroutable)
	}
	if r.obs != nil {
		r.obs.Retried(r.queue, next)
	}
	r.log.Debug("retry: message retried", "message_id", d.MessageId, "attempt", next, "error", errorText(cause))
	if err := d.Ack(false); err != nil {
		return Retried, fmt.Errorf("retry: acking message %q after its retry %d was confirmed (it will be delivered again): %w", d.MessageId, next, err)
	}
	return Retried, nil
}

// Reject sends d to the queue's DLQ with reason contract.ReasonRejected and
// cause as its last error, and acks d once the broker confirmed. Errors are
// as for Retry.
func (r *Retrier) Reject(ctx context.Context, d amqp.Delivery, cause error) (Outcome, error) {
	return r.deadLetter(ctx, d, cause, contract.ReasonRejected)
}

func (r *Retrier) deadLetter(ctx context.Context, d amqp.Delivery, cause error, reason string) (Outcome, error) {
	msg := republishing(&d, cause, r.now())
	msg.Headers[contract.HeaderDeadLetterReason] = reason
	dlx := contract.DeadLetterExchange(r.queue)
	res := r.pub.publish(ctx, dlx, r.queue, msg)
	switch {
	case res.err != nil:
		return r.requeue(d, fmt.Errorf("retry: publishing message %q to the dead-letter exchange %q: %w", d.MessageId, dlx, res.err))
	case !res.acked:
		return r.requeue(d, fmt.Errorf("retry: broker nacked message %q sent to the dead-letter exchange %q", d.MessageId, dlx))
	case res.returned:
		return r.requeue(d, fmt.Errorf("retry: dead-letter exchange %q could not route message %q (is its DLQ bound? run `rmqtopo apply`)", dlx, d.MessageId))
	}
	if r.obs != nil {
		r.obs.DeadLettered(r.queue, reason)
	}
	r.log.Warn("retry: message dead-lettered", "message_id", d.MessageId, "reason", reason, "error", errorText(cause))
	if err := d.Ack(false); err != nil {
		return DeadLettered, fmt.Errorf("retry: acking message %q after its dead-letter copy was confirmed (it will be delivered again): %w", d.MessageId, err)
	}
	return DeadLettered, nil
}

// requeue nacks d with requeue after a failed publish, so it is not lost.
func (r *Retrier) requeue(d amqp.Delivery, cause error) (Outcome, error) {
	r.log.Error("retry: could not republish the message; requeueing it", "message_id", d.MessageId, "error", cause)
	if err := d.Nack(false, true); err != nil {
		return Requeued, fmt.Errorf("%w; nack with requeue failed too (the broker redelivers it when the channel closes): %v", cause, err)
	}
	return Requeued, cause
}
