package ops

import (
	"context"
	"errors"
	"fmt"
	"io"

	amqp "github.com/rabbitmq/amqp091-go"
)

// MoveRequest says what MoveQueue moves: the messages of Queue into To,
// both in Vhost, at most Limit of them (0: all).
type MoveRequest struct {
	Vhost, Queue, To string
	Limit, Window    int
	// DryRun counts what would move (Result.LeftBy under NoteWouldMove)
	// and moves nothing.
	DryRun bool
	Log    io.Writer
}

// ErrSameQueue is MoveQueue's refusal of a move of a queue into itself.
var ErrSameQueue = errors.New("a queue cannot be moved into itself")

// MoveQueue moves a queue's messages into another existing queue of the
// same vhost exactly as they are: body, properties and every header,
// rmqtopo's and the broker's alike (only the user-id goes, which the
// broker refuses from another user), so that a queue renamed in the spec
// hands its messages to the new one as if they had been published there.
// Unlike a replay it stamps nothing and resets nothing. Each copy is
// published persistent and mandatory with confirms and its original acked
// only once the copy is confirmed (see Pass): a move that stops leaves the
// rest in place, and moving again finishes it. Like ReplayQueue it returns
// no results when it failed before its pass began, else the pass's.
func MoveQueue(ctx context.Context, b Broker, r MoveRequest) ([]Result, error) {
	if r.To == r.Queue {
		return nil, fmt.Errorf("queue %q: %w", r.Queue, ErrSameQueue)
	}
	s, err := open(ctx, b, r.Vhost, r.Window, "move")
	if err != nil {
		return nil, err
	}
	defer s.close()
	// A whole move leaves a message in place only when its copy fails, so
	// only a dry run or a limit (which leave messages by design, each one
	// delivery more) must mind a quorum queue's delivery limit.
	q, err := s.b.Queue(ctx, r.Vhost, r.Queue)
	if errors.Is(err, ErrNotFound) {
		return nil, &QueueNotFoundError{Queue: r.Queue, Vhost: r.Vhost}
	} else if err != nil {
		return nil, err
	}
	if r.DryRun || r.Limit > 0 {
		if err := CheckLeaveSafe(q, s.major); err != nil {
			return nil, err
		}
	}
	if _, err := b.Queue(ctx, r.Vhost, r.To); errors.Is(err, ErrNotFound) {
		return nil, &QueueNotFoundError{Queue: r.To, Vhost: r.Vhost}
	} else if err != nil {
		return nil, err
	}
	verb := "moving"
	if r.DryRun {
		verb = "dry run: nothing moves; counting what would move"
	}
	fmt.Fprintf(r.Log, "%s %s into %s\n", verb, r.Queue, r.To)
	if note := LookingIsDelivery(q); note != "" && r.DryRun {
		fmt.Fprintln(r.Log, note)
	}
	p := passProgress(r.Log)
	pass := Pass{
		Queue: r.Queue, Target: r.To, MaxMoves: r.Limit, Window: r.Window, Progress: p.Update,
		InPlaceRequeue: InPlaceRequeue(q.Type),
		Decide:         func(int, *amqp.Delivery) Decision { return Decision{Move: true} },
		Rewrite:        Copy,
	}
	if r.DryRun {
		dryRun(&pass, r.Limit)
	}
	res, err := pass.Run(ctx, s.conn)
	p.Stop()
	res.Target = r.To
	if !r.DryRun {
		fmt.Fprintln(r.Log, "move keeps every header as it was")
	}
	warn(r.Log, res)
	return []Result{res}, err
}
