package ops

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/move"
)

// Decision is what a pass does with one message: Move it, or leave it
// in place with a Note saying why ("filter", "below threshold",
// NoteUnreadable...); Result.LeftBy counts the notes.
type Decision = move.Decision

// Pass is one scan of a queue that moves some messages to a target queue
// and leaves every other message in place, in order. See the package
// documentation for how and why.
type Pass struct {
	// Queue is scanned; Target receives moved messages, through the default
	// exchange. An empty Target makes a read-only pass (a peek).
	Queue, Target string
	// Scan bounds the messages examined; 0 means the queue's depth when the
	// pass starts, so a pass never examines a message twice.
	Scan int
	// MaxMoves stops the pass after that many moves; 0 means no limit.
	MaxMoves int
	// Window is the most deliveries held at once (the consumer prefetch).
	Window int
	// InPlaceRequeue says the queue puts a requeued message back where it
	// was (classic queues). Otherwise (quorum queues put it at their tail,
	// and unknown types are treated alike) a pass that stops early still
	// takes the rest of the queue, untouched, so that requeueing everything
	// in order keeps the order.
	InPlaceRequeue bool
	// Decide is called once per examined message, in queue order, with its
	// 1-based position; nil moves every message.
	Decide func(position int, d *amqp.Delivery) Decision
	// Rewrite builds the copy published to Target; nil copies the message
	// (see Copy).
	Rewrite func(d *amqp.Delivery) amqp.Publishing
	// Progress, if set, is called after each examined message.
	Progress func(Result)
	// SettleTimeout bounds each wait for outstanding confirms, and the wait
	// for the broker to settle acks and requeues at the end; 0 means 30s.
	SettleTimeout time.Duration
}

// DefaultWindow is the default number of deliveries a pass holds at once.
const DefaultWindow = move.DefaultWindow

// FormatProgress renders a pass's progress for stderr.
func FormatProgress(r Result, elapsed time.Duration) string {
	verb := "moved"
	if r.Target == "" {
		verb = "read"
	}
	n := r.Moved
	if r.Target == "" {
		n = r.Scanned
	}
	return fmt.Sprintf("%s: examined %d of %d, %s %d, left %d, failed %d (%s)",
		r.Queue, r.Scanned, r.Depth, verb, n, r.Left, r.Failed, elapsed.Round(time.Second))
}

// QueueNotFoundError says a queue does not exist (in Vhost, when known);
// Work marks the work queue a replay moves to, which the caller may name.
type QueueNotFoundError struct {
	Queue, Vhost string
	Work         bool
}

func (e *QueueNotFoundError) Error() string {
	what := "queue"
	if e.Work {
		what = "work queue"
	}
	if e.Vhost != "" {
		return fmt.Sprintf("%s %q not found in vhost %q", what, e.Queue, e.Vhost)
	}
	return fmt.Sprintf("%s %q not found", what, e.Queue)
}

// WindowError is a window (messages held at once) out of AMQP's prefetch
// range.
type WindowError struct{ Window int }

func (e *WindowError) Error() string {
	return fmt.Sprintf("the window must be between 1 and 65535 messages, got %d", e.Window)
}

// NotDLQNameError is a replay from a queue whose work queue its name does
// not give ("Q.dlq"): the caller names the work queue.
type NotDLQNameError struct{ Queue string }

func (e *NotDLQNameError) Error() string {
	return fmt.Sprintf("queue %q is not named like a DLQ (%q): name the work queue to replay to", e.Queue, contract.DeadLetterQueue("QUEUE"))
}

// UndeclaredTargetError is a sweep target that no spec the caller gave
// declares (see CheckSweepTargets).
type UndeclaredTargetError struct{ Target, Queue string }

func (e *UndeclaredTargetError) Error() string {
	return fmt.Sprintf("target %q of queue %q is not a queue of any spec given", e.Target, e.Queue)
}

// Run runs the pass on a channel of its own over conn, with the engine
// of internal/move, which migrations use too.
//
// Messages are consumed with manual acks and a prefetch of Window. A
// message to move is published to Target (persistent, mandatory, in
// confirm mode) and acked in the source only after the broker confirmed
// the copy; any other outcome keeps it unacked. Messages left in place are
// held unacked until the end of the pass, then requeued one by one in
// delivery order. When a consumer holds a full window of messages, it is
// cancelled (its deliveries stay held) and a new one takes the next window,
// so memory stays bounded by Window whatever the queue's depth. Before
// closing its channel, Run waits until the broker has settled every ack
// and requeue: closing earlier makes a quorum queue return unsettled
// messages out of order, and acked ones as duplicates.
func (p Pass) Run(ctx context.Context, conn *amqp.Connection) (Result, error) {
	e := move.Pass{
		Queue: p.Queue, Target: p.Target, Scan: p.Scan, MaxMoves: p.MaxMoves, Window: p.Window,
		InPlaceRequeue: p.InPlaceRequeue, Rewrite: p.Rewrite, SettleTimeout: p.SettleTimeout,
		QueueError: queueError, Decide: p.Decide, Progress: p.Progress,
	}
	return e.Run(ctx, conn)
}

// queueError turns a failed queue operation into a one-line error.
func queueError(queue string, err error) error {
	var ae *amqp.Error
	if errors.As(err, &ae) {
		switch ae.Code {
		case amqp.NotFound:
			return &QueueNotFoundError{Queue: queue}
		case amqp.AccessRefused:
			return fmt.Errorf("access to queue %q refused: %s", queue, ae.Reason)
		}
	}
	return fmt.Errorf("queue %q: %w", queue, err)
}

// Copy returns a persistent copy of a delivery's message: same body,
// headers and properties, but the user-id, which the broker refuses from
// another user.
func Copy(d *amqp.Delivery) amqp.Publishing { return move.Copy(d) }
