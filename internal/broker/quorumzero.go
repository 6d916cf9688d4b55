package broker

import (
	"context"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/topology"
)

// recountPauses are the pauses before asking again for the count of a
// quorum queue that answered 0 messages and 0 consumers: RabbitMQ 3.x gives
// that answer when the queue's leader does not reply within 250 ms
// (rabbit_quorum_queue:stat/2), which a busy leader recovers from within a
// second or so.
var recountPauses = []time.Duration{100 * time.Millisecond, 300 * time.Millisecond, 900 * time.Millisecond}

// settleQuorumZeros makes sure a 0/0 count of a quorum queue in counts is
// not RabbitMQ's stand-in for "the leader did not answer": a plan shows
// that count as the messages a destructive change puts at stake. It asks
// such queues again after each of recountPauses. A queue that still says
// 0/0 is left to addHeld, whose fresh total counts every message the queue
// holds, ready ones included (before it, a queue whose statistics showed
// messages was made unknown here; a native queue holding only delayed
// retries says 0/0 for good, and its count is exact now).
func (c *Client) settleQuorumZeros(ctx context.Context, s *Session, st *topology.State, vhost string, counts map[string]amqp.Queue) error {
	doubt := quorumZeros(st, vhost, counts)
	for _, pause := range recountPauses {
		if len(doubt) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		again, err := s.PassiveCounts(ctx, vhost, doubt)
		if err != nil {
			return err
		}
		for _, n := range doubt {
			if q, ok := again[n]; ok {
				counts[n] = q
			} else {
				delete(counts, n) // deleted meanwhile: unknown, as in PassiveCounts
			}
		}
		doubt = quorumZeros(st, vhost, again)
	}
	// A queue still at 0/0 keeps it: addHeld, which runs next, raises it
	// to the total the queue's own statistics give, fresh, which holds its
	// ready messages too, so a leader that did not answer costs no count.
	return nil
}

// quorumZeros returns the names in counts that answered 0 messages and 0
// consumers and are quorum queues of vhost in st (by argument, or by the
// vhost's default queue type when the queue names none).
func quorumZeros(st *topology.State, vhost string, counts map[string]amqp.Queue) []string {
	var out []string
	for _, q := range st.Topology.Queues {
		if q.Vhost != vhost {
			continue
		}
		c, ok := counts[q.Name]
		if !ok || c.Messages != 0 || c.Consumers != 0 || !isQuorum(st, q) {
			continue
		}
		out = append(out, q.Name)
	}
	return out
}

func isQuorum(st *topology.State, q topology.Queue) bool {
	if _, named := q.Arguments["x-queue-type"]; named {
		return q.QueueType() == "quorum"
	}
	return st.DefaultQueueType[q.Vhost] == "quorum"
}
