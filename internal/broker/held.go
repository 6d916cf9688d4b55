package broker

import (
	"context"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/topology"
)

// What a quorum queue holds that a passive declare does not count.
//
// A passive queue.declare answers a quorum queue's ready messages only
// (rabbit_fifo:query_stat/1). The queue may hold more, which a delete
// drops all the same:
//   - retries held back for a delayed retry (RabbitMQ 4.3,
//     x-delayed-retry-type or the delayed-retry-type policy key): neither
//     ready nor delivered, messages_delayed in the statistics;
//   - dead-letters held until their target confirms them (at-least-once
//     dead-lettering), messages_dlx;
//   - deliveries not yet acknowledged on a channel that has no consumer
//     on the queue any more (basic.get, a cancelled consumer).
//
// The queue's total, the management API's "messages", counts all of them
// (rabbit_fifo's messages_total; held dead-letters included since 3.10:
// on 3.10.8 messages minus ready minus unacknowledged was exactly the held
// dead-letters). No AMQP or HTTP call answers it live: the queue writes it
// into the broker's metrics at each tick (quorum_tick_interval, 5 s by
// default: rabbit_quorum_queue:handle_tick/3) and the management plugin
// collects it from there every statistics interval (5 s by default). So a
// retry returned a moment ago is missing from it for up to about 10 s
// (seen on 4.3.6: 9 s).
//
// freshTotals makes the figure exact for a queue that has no consumer
// (one with a consumer is refused anyway: it may hold unacknowledged
// deliveries): without a consumer no retry can be returned to the queue
// any more, so a total written by a tick after the count began holds every
// message. The same tick writes the queue process's reductions, which
// grow at every tick, in the same metrics row; the total is fresh once the
// reductions the management API shows have changed twice since the count
// began (the first change may come from a tick that ran before it, seen
// late through the collector; the second cannot, as long as the tick is
// no shorter than the statistics interval, as RabbitMQ's defaults are).

// freshPoll is how often freshTotals asks for new statistics; freshWait
// bounds its wait: past it, a queue's total stays unknown (two ticks and a
// collection take about 10-15 s with RabbitMQ's defaults).
const (
	freshPoll = 200 * time.Millisecond
	freshWait = 45 * time.Second
)

// freshTicks is the number of changes of a queue's reductions after
// which its total is fresh (see above).
const freshTicks = 2

// freshTotals returns the total of each named quorum queue of vhost, from
// statistics written after the call began (see above). A queue whose
// statistics did not renew within freshWait, or that is gone, is absent:
// its total is unknown.
func (c *Client) freshTotals(ctx context.Context, vhost string, names []string) (map[string]int64, error) {
	out := map[string]int64{}
	if len(names) == 0 {
		return out, nil
	}
	type seen struct {
		reductions *int64
		changes    int
	}
	pending := map[string]*seen{}
	for _, n := range names {
		pending[n] = &seen{}
	}
	defer c.waiting(func() string {
		which := fmt.Sprintf("%d quorum queues", len(names))
		if len(names) == 1 {
			which = fmt.Sprintf("quorum queue %q", names[0])
		}
		return "fresh statistics of " + which + ", to count the retries held back and the deliveries not settled that a delete would drop"
	})()
	deadline := time.Now().Add(freshWait)
	for first := true; len(pending) > 0; first = false {
		counts, err := c.QueueCounts(ctx, vhost, keys(pending))
		if err != nil {
			return nil, err
		}
		for n, s := range pending {
			qc, ok := counts[n]
			switch {
			case !ok || qc.Reductions == nil:
				continue
			case first:
				s.reductions = qc.Reductions
				continue
			case s.reductions == nil || *s.reductions != *qc.Reductions:
				s.reductions, s.changes = qc.Reductions, s.changes+1
			}
			if s.changes >= freshTicks {
				out[n] = qc.Messages
				delete(pending, n)
			}
		}
		if len(pending) == 0 || time.Now().After(deadline) {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(freshPoll):
		}
	}
	return out, nil
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// addHeld raises the count of each quorum queue of vhost in counts that
// has no consumer to its fresh total (see freshTotals), so that what the
// queue holds beyond its ready messages is at stake too; a queue whose
// total stays unknown is removed from counts, which plan.Check treats as
// unknown and so refuses. A queue with a consumer keeps its ready count:
// its consumer already refuses a destructive change.
func (c *Client) addHeld(ctx context.Context, st *topology.State, vhost string, counts map[string]amqp.Queue) error {
	var names []string
	for _, q := range st.Topology.Queues {
		if c, ok := counts[q.Name]; ok && q.Vhost == vhost && c.Consumers == 0 && isQuorum(st, q) {
			names = append(names, q.Name)
		}
	}
	totals, err := c.freshTotals(ctx, vhost, names)
	if err != nil {
		return err
	}
	for _, n := range names {
		total, ok := totals[n]
		if !ok {
			delete(counts, n)
			continue
		}
		q := counts[n]
		q.Messages = max(q.Messages, int(total))
		counts[n] = q
	}
	return nil
}

// confirmNoneHeld returns ErrNotEmpty when quorum queue q, which a passive
// declare counted empty and without consumers, still holds a message
// (see freshTotals), or when its total cannot be read fresh in time.
// Other types hold nothing a passive declare misses.
func (s *Session) confirmNoneHeld(ctx context.Context, q topology.Queue) error {
	if q.QueueType() != "quorum" {
		return nil
	}
	totals, err := s.freshTotals(ctx, q.Vhost, []string{q.Name})
	if err != nil {
		return err
	}
	total, ok := totals[q.Name]
	switch {
	case !ok:
		return &Error{Kind: ErrNotEmpty, Msg: fmt.Sprintf(
			"queue %q may hold messages the broker keeps back (delayed retries, dead-letters awaiting confirmation), and its statistics did not renew within %s to say", q.Name, freshWait)}
	case total > 0:
		return &Error{Kind: ErrNotEmpty, Msg: fmt.Sprintf(
			"queue %q holds %d messages that are neither ready nor with a consumer: retries the broker holds for a delayed retry, or dead-letters awaiting their target's confirm", q.Name, total)}
	}
	return nil
}
