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
// documentation for how and why. Its fields are move.Pass's, the one
// definition of them; the dlq commands leave UntilEmpty and ConsumerTag
// unset, and Run words a missing or refused queue (QueueError) unless
// the caller does.
type Pass move.Pass

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
	e := move.Pass(p)
	if e.QueueError == nil {
		e.QueueError = queueError
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
