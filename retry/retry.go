// Package retry turns a message handler's error into the right move through
// the retry topology that rmqtopo provisioned: retry later, or dead-letter.
//
// A service knows only its work queue. The delays and the number of retries
// live in the topology (see package contract): the helper republishes a
// failed delivery to the queue's retry exchange with the next attempt
// number, and the exchange routes it to the right wait queue or back to the
// queue at once. Past the last retry no binding matches, the broker returns
// the copy, and the helper sends the message to the DLQ itself, as
// exhausted, and says so.
//
//	err := retry.Consume(ctx, retry.DialURL(url, amqp.Config{}), "orders.created",
//		func(ctx context.Context, d amqp.Delivery) error {
//			if bad(d) {
//				return retry.Permanent(errors.New("malformed order")) // straight to the DLQ
//			}
//			return handle(ctx, d) // nil: ack; an error: retry later
//		}, retry.WithPrefetch(16))
//
// Consume runs the whole consumer (prefetch, parallel handlers, graceful
// shutdown, reconnection); New and Retrier.Handle are the pieces for a
// service with a consumer loop of its own.
//
// # Guarantees
//
// Delivery is at-least-once, never at-most-once. A retry or dead-letter copy
// is published with mandatory=true on a separate channel in confirm mode,
// and the original delivery is acked only after the broker confirmed the
// copy. A copy the broker nacks is published again after a pause (100ms,
// doubling up to 1s) while the confirm timeout lasts. If the nacks outlast
// it, the dead-letter exchange returns the copy, or the channel closes
// before it confirms, the original is nacked with requeue and comes back:
// the message is never lost and its attempt is counted once per copy that
// exists. A crash between the confirmation and
// the ack leaves both the copy and the unacked original, which the broker
// redelivers: one duplicate, never a loss. Handlers must therefore be
// idempotent.
//
// A retry copy that the retry exchange returns (no binding for its
// attempt: the schedule is over) is sent to the DLQ instead, with
// contract.HeaderDeadLetterReason set to contract.ReasonExhausted, and the
// outcome is DeadLettered.
//
// A handler's error is classified: nil acks; the handler's own context
// being cancelled (a shutdown) requeues the delivery unchanged; an error
// that errors.Is ErrReject (see Permanent) goes to the DLQ at once with
// reason contract.ReasonRejected; any other error, or a panic, is retried.
// A delivery whose attempt header is malformed (unparseable, not positive,
// absurdly large, or of a wrong AMQP type) is still handed to the handler;
// if that fails it goes to the DLQ with reason ReasonMalformedAttempt
// rather than loop.
//
// A Retrier is safe for concurrent use by any number of handlers (consumer
// prefetch above one). They share one confirm-mode channel: each handler
// publishes and waits only for its own confirmation, which the connection's
// reader matches to it by delivery tag, so confirmations are pipelined. If
// the broker or the network closes that channel, the next publish opens a
// new one.
//
// A queue of the native layout (RabbitMQ 4.3.1+) has no retry exchange:
// it delays its retries itself. The helper reads its schedule from its
// arguments over AMQP 1.0 and returns a failed delivery to it, by
// basic.reject where the broker computes the schedule, else over AMQP 1.0
// with the modified outcome held until its time (see nativeRoute.decide).
//
// A Retrier publishes with the connection it is given; it does not reconnect
// a closed connection. Consume does, with a new Retrier on each connection.
package retry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
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
	// Retried: the retry exchange routed and confirmed a copy with the
	// next attempt number, and the delivery was acked.
	Retried
	// DeadLettered: the dead-letter exchange confirmed a copy, and the
	// delivery was acked: the handler rejected it, its schedule is
	// exhausted (the retry exchange returned the retry copy), or its
	// attempt header is malformed. Settlement.Reason says which.
	DeadLettered
	// Requeued: the delivery was nacked with requeue, unchanged; the
	// broker delivers it again. Either a copy could not be confirmed, or
	// the handler returned because its context was cancelled (shutdown).
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

// Retrier settles the deliveries of one work queue: it carries out what
// its route decides (decide.go) over its connection.
type Retrier struct {
	route route
	// schedule is the native schedule decisions follow, the nativeRoute's
	// until refreshSchedule finds another.
	schedule atomic.Pointer[contract.Native]
	log      *slog.Logger
	obs      multiObserver
	// tracer, when set, follows each delivery a handler runs on.
	tracer Tracer
	pub    *publisher
	now    func() time.Time
	// warned: a RetryAfter this queue cannot honour was logged
	// (warnUnhonoured); shared by the Retriers of one Consume, which
	// makes one per connection.
	warned *atomic.Bool
}

// New returns a Retrier for the deliveries of queue, publishing over conn.
// It first checks, with passive declares on a throwaway channel, that the
// queue's retry exchange, dead-letter exchange and DLQ exist, and fails
// with an error saying to run `rmqtopo apply` if not. It declares nothing.
// It also refuses options that do not fit the queue's layout: a queue
// whose delayed retries go through the delay ladder
// (contract.LevelsMarker) needs WithLevels, and any other refuses it.
// If the queue has a return queue (contract.ReturnQueue), retries through
// a shared wait queue are published with its name as routing key, so they
// come back into it.
func New(conn *amqp.Connection, queue string, opts ...Option) (*Retrier, error) {
	if conn == nil {
		return nil, errors.New("retry: nil connection")
	}
	if queue == "" {
		return nil, errors.New("retry: empty queue name")
	}
	r, err := newRetrier(conn, nil, queue, newOptions(opts))
	if err != nil {
		return nil, err
	}
	if n, ok := r.native(); ok && n.schedule.Route == contract.RouteModified {
		r.Close()
		return nil, fmt.Errorf("retry: queue %q holds each retry until a time of the helper's choosing, which needs its deliveries over AMQP 1.0: consume it with Consume: %w", queue, errMisfit)
	}
	return r, err
}

// newRetrier is New's Retrier, and Consume's, which passes the login its
// connection was dialed with (nil from New), for a native queue's AMQP
// 1.0 connection.
func newRetrier(conn *amqp.Connection, l *login, queue string, o options) (*Retrier, error) {
	rt, err := findRoute(conn, l, queue, o.levels)
	if err != nil {
		return nil, err
	}
	pending := func(delta int) { o.obs.ConfirmsPending(queue, delta) }
	r := &Retrier{
		route:  rt,
		log:    o.log.With("queue", queue),
		obs:    o.obs,
		tracer: o.tracer,
		pub:    newPublisher(conn, o.log, o.confirmTimeout, pending),
		now:    time.Now,
		warned: o.warned,
	}
	if n, ok := rt.(nativeRoute); ok {
		r.schedule.Store(n.schedule)
	}
	return r, nil
}

// findRoute finds how queue retries: through its retry exchange (and a
// return queue, or the delay ladder of l), or, for a queue without one,
// inside itself (the native layout, read over AMQP 1.0).
func findRoute(conn *amqp.Connection, login *login, queue string, l *levels) (route, error) {
	retryX := contract.RetryExchange(queue)
	hasRetry, err := exchangeExists(conn, retryX)
	if err != nil {
		return nil, fmt.Errorf("retry: checking the exchange %q of queue %q: %w", retryX, queue, err)
	}
	if !hasRetry {
		return findNative(conn, login, queue, l)
	}
	back, err := checkTopology(conn, queue)
	if err != nil {
		return nil, err
	}
	if err := checkLevels(conn, queue, l); err != nil {
		return nil, err
	}
	return exchangeRoute{queue: queue, back: back, levels: l}, nil
}

// findNative is the route of a queue without a retry exchange: native,
// or a topology that is missing.
func findNative(conn *amqp.Connection, login *login, queue string, l *levels) (route, error) {
	n, apart, err := nativeOf(conn, login, queue)
	if n == nil {
		why := ""
		if err != nil {
			why = fmt.Sprintf(" (nor is it a native queue: %v)", err)
		}
		return nil, fmt.Errorf("retry: queue %q has no exchange %q%s: run `rmqtopo apply` with its spec to provision the retry topology: %w",
			queue, contract.RetryExchange(queue), why, errTopology)
	}
	if l != nil {
		return nil, fmt.Errorf("retry: queue %q retries inside itself (layout native): drop retry.WithLevels: %w", queue, errMisfit)
	}
	if _, err := checkTopology(conn, queue); err != nil {
		return nil, err
	}
	return nativeRoute{queue: queue, schedule: n, apart: apart, login: login}, nil
}

// errTopology marks a missing retry topology: a configuration error, not a
// lost connection.
var errTopology = errors.New("retry topology missing")

// checkTopology passively declares the dead-letter exchange and queue the
// helper publishes to, and returns the queue's return queue, or "" if it
// has none. A failed
// passive declare closes its channel, which is why it gets one of its own.
func checkTopology(conn *amqp.Connection, queue string) (back string, err error) {
	ch, err := conn.Channel()
	if err != nil {
		return "", fmt.Errorf("retry: opening a channel to check the topology of queue %q: %w", queue, err)
	}
	defer ch.Close()
	missing := func(kind, name string, err error) error {
		var aerr *amqp.Error
		if errors.As(err, &aerr) && aerr.Code == amqp.NotFound {
			return fmt.Errorf("retry: queue %q has no %s %q: run `rmqtopo apply` with its spec to provision the retry topology: %w", queue, kind, name, errTopology)
		}
		return fmt.Errorf("retry: checking the %s %q of queue %q (is the topology provisioned? run `rmqtopo apply`): %w", kind, name, queue, err)
	}
	dlx := contract.DeadLetterExchange(queue)
	if err := ch.ExchangeDeclarePassive(dlx, "fanout", true, false, false, false, nil); err != nil {
		return "", missing("exchange", dlx, err)
	}
	// The DLQ is not checked by name: a spec may name it (dlq_name, a DLQ
	// made by hand and adopted), and the helper only ever publishes to
	// the DLX, which rmqtopo declares with the DLQ bound to it.
	if ok, err := hasReturnQueue(ch, queue); !ok || err != nil {
		return "", err
	}
	return contract.ReturnQueue(queue), nil
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

// Attempt returns the attempt number of d: 1 for a first delivery, 2 for
// the first retry (contract.HeaderAttempt). ok is false, and attempt 0, if
// the attempt header is malformed. On a native queue, whose retries are
// the broker's redeliveries, Handle (and so Consume) sets the header from
// the broker's delivery count before the handler runs.
func Attempt(d amqp.Delivery) (attempt int, ok bool) {
	return contract.ParseAttempt(d.Headers[contract.HeaderAttempt])
}
