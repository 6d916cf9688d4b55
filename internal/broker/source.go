package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/topology"
)

// countChannels is how many channels of one connection pipeline the
// passive declares of a count: each channel waits for one answer at a
// time, so several keep the broker busy. docs/benchmarks.md has the
// figures.
const countChannels = 8

// Count adds to st the exact message and consumer counts of the named
// queues, by vhost, from an AMQP passive queue.declare of each, which the
// broker answers with the queue's ready messages and consumers at that
// instant (the management API's statistics lag by seconds). With Read, it
// makes a Client a plan.Source. A queue that does not exist any more, or
// that the broker refuses to count (an exclusive queue of another
// connection), or a quorum queue that may have given RabbitMQ's stand-in
// 0 for a leader that did not answer (see settleQuorumZeros), stays
// absent, which plan.Check treats as unknown and so refuses; one that
// does not exist any more is also marked in st.Vanished (the read is
// stale: plan.Make reads again). A failure to connect is an error.
func (c *Client) Count(ctx context.Context, st *topology.State, need map[string][]string) error {
	if len(need) == 0 {
		return nil
	}
	s, err := c.NewSession(ctx)
	if err != nil {
		return fmt.Errorf("count messages: %w", err)
	}
	defer s.Close()
	for _, v := range slices.Sorted(maps.Keys(need)) {
		counts, gone, err := s.passiveCounts(ctx, v, need[v])
		if err != nil {
			return fmt.Errorf("count messages in vhost %q: %w", v, err)
		}
		markVanished(st, v, gone)
		if err := c.settleQuorumZeros(ctx, s, st, v, counts); err != nil {
			return fmt.Errorf("count messages in vhost %q: %w", v, err)
		}
		if err := c.addHeld(ctx, st, v, counts); err != nil {
			return fmt.Errorf("count messages in vhost %q: %w", v, err)
		}
		for n, q := range counts {
			a := topology.Address{Kind: topology.KindQueue, Vhost: v, Name: n}
			st.Messages[a] = int64(q.Messages)
			st.Consumers[a] = int64(q.Consumers)
		}
	}
	return nil
}

// markVanished records in st the queues of vhost that a count found gone
// although st's read listed them. A queue the read did not list (a
// migration's temporary queue, looked for in case it is there) is not
// news.
func markVanished(st *topology.State, vhost string, gone []string) {
	if len(gone) == 0 {
		return
	}
	listed := map[string]bool{}
	for _, q := range st.Topology.Queues {
		if q.Vhost == vhost {
			listed[q.Name] = true
		}
	}
	for _, n := range gone {
		if !listed[n] {
			continue
		}
		if st.Vanished == nil {
			st.Vanished = map[topology.Address]bool{}
		}
		st.Vanished[topology.Address{Kind: topology.KindQueue, Vhost: vhost, Name: n}] = true
	}
}

// PassiveCounts declares each named queue of vhost passively, over
// countChannels channels of one connection, and returns what the broker
// answered, by name. Queues that do not exist or may not be declared
// (404, 405) are absent; any other failure is an error.
func (s *Session) PassiveCounts(ctx context.Context, vhost string, names []string) (map[string]amqp.Queue, error) {
	counts, _, err := s.passiveCounts(ctx, vhost, names)
	return counts, err
}

// passiveCounts is PassiveCounts, and also returns the names of the
// queues that do not exist (404), sorted.
func (s *Session) passiveCounts(ctx context.Context, vhost string, names []string) (map[string]amqp.Queue, []string, error) {
	conn, err := s.Dial(vhost, "count")
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close()
	pc := &passiveCounter{conn: conn, display: s.display, out: make(map[string]amqp.Queue, len(names))}
	work := make(chan string)
	var wg sync.WaitGroup
	for w := 0; w < min(countChannels, len(names)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pc.count(work)
		}()
	}
feed:
	for _, n := range uniqueSorted(names) {
		select {
		case work <- n:
		case <-ctx.Done():
			pc.fail(ctx.Err())
			break feed
		}
	}
	close(work)
	wg.Wait()
	if pc.first != nil {
		return nil, nil, pc.first
	}
	slices.Sort(pc.gone)
	return pc.out, pc.gone, nil
}

// passiveCounter gathers the answers of PassiveCounts' channels.
type passiveCounter struct {
	conn    *amqp.Connection
	display string
	mu      sync.Mutex
	out     map[string]amqp.Queue
	gone    []string // 404: the queue does not exist
	first   error
}

func (pc *passiveCounter) fail(err error) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.first == nil {
		pc.first = err
	}
}

// count declares passively each queue it receives, on a channel of its
// own, opening another when the broker closed it (a missing or exclusive
// queue).
func (pc *passiveCounter) count(work <-chan string) {
	var ch *amqp.Channel
	defer func() {
		if ch != nil {
			ch.Close()
		}
	}()
	for name := range work {
		if ch == nil || ch.IsClosed() {
			var cerr error
			if ch, cerr = pc.conn.Channel(); cerr != nil {
				pc.fail(amqpError(pc.display, cerr))
				continue
			}
		}
		q, err := ch.QueueDeclarePassive(name, false, false, false, false, nil)
		var ae *amqp.Error
		switch {
		case err == nil:
			pc.mu.Lock()
			pc.out[name] = q
			pc.mu.Unlock()
		case errors.As(err, &ae) && ae.Code == amqp.NotFound:
			ch = nil // the broker closed the channel
			pc.mu.Lock()
			pc.gone = append(pc.gone, name)
			pc.mu.Unlock()
		case errors.As(err, &ae) && ae.Code == amqp.ResourceLocked:
			ch = nil // the broker closed the channel
		default:
			pc.fail(amqpError(pc.display, err))
		}
	}
}
