package broker

import (
	"context"
	"errors"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/move"
)

// MoveWindow is the most messages a move holds unacknowledged at once:
// its consumer prefetch, and so the bound on publishes awaiting a confirm.
const MoveWindow = 1000

// Move moves every message of queue src to queue dst in vhost, until src
// is drained (no ready message, none on its way to the move), and returns
// how many it moved. progress, if set,
// is called with the count so far after each acknowledgement.
//
// It is a move.Pass with UntilEmpty, on a connection of its own: each
// message is published to dst through the default exchange, persistent
// and mandatory, in confirm mode, and acknowledged in src only once the
// broker confirmed the copy (a hundred at a time, with one multiple ack):
// a crash at any point leaves each message in src, in dst, or (published,
// confirmed, not yet acknowledged) in both, never in neither. A copy
// returned as unroutable (dst is gone) or nacked stops the move with its
// source unacknowledged, so the broker puts it back in src. Messages keep
// their order: one consumer, one channel, publishes in delivery order.
// Other consumers of src may take messages meanwhile; they are theirs.
func (s *Session) Move(ctx context.Context, vhost, src, dst string, progress func(int)) (int, error) {
	conn, err := s.Dial(vhost, "migrate")
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	p := move.Pass{Queue: src, Target: dst, UntilEmpty: true, Window: MoveWindow, ConsumerTag: "rmqtopo-migrate"}
	if progress != nil {
		p.Progress = func(r move.Result) { progress(r.Moved) }
	}
	res, err := p.Run(ctx, conn)
	if err == nil && res.Stopped != "" {
		err = errors.New(res.Stopped)
	}
	var ae *amqp.Error
	if errors.As(err, &ae) {
		err = amqpError(s.display, err)
	}
	return res.Moved, err
}
