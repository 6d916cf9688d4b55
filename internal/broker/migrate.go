package broker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/definitions"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Steps of a migration, in order, as MigrateHook reports them.
const (
	// StepTemp: the temporary queue exists.
	StepTemp = "temp"
	// StepBindTemp: the temporary queue is bound like the queue, and the
	// queue no longer is (except by the default exchange).
	StepBindTemp = "bind-temp"
	// StepMoveOut: one more batch of messages was moved out (reported
	// during the move, with the count so far) or the queue is empty.
	StepMoveOut = "move-out"
	// StepDelete: the old queue is deleted (reported with the number of
	// messages moved out).
	StepDelete = "delete"
	// StepDeclare: the queue exists with its new properties.
	StepDeclare = "declare"
	// StepRebind: the queue has its bindings back and the temporary queue
	// has none.
	StepRebind = "rebind"
	// StepMoveBack: like StepMoveOut, from the temporary queue back.
	StepMoveBack = "move-back"
	// StepDone: the temporary queue is deleted (reported with the number
	// of messages moved back).
	StepDone = "done"
)

// maxDrainRounds bounds the move-and-delete rounds of the old queue: each
// round that finds it not empty moved what arrived (a publish through the
// default exchange, a consumer's requeue) first.
const maxDrainRounds = 20

// migrationDelivery is the x-delivery-limit of a quorum temporary queue:
// it has no dead-letter exchange, and a migration interrupted again and
// again redelivers its head; RabbitMQ 4.x drops a message past 20.
const migrationDeliveryLimit = 1_000_000

// MigrationTemp is the temporary queue of the migration of a queue to
// after: durable, of the new queue's type (so it keeps the messages as
// safely as the new queue will), with no other argument (no TTL, limit or
// dead-lettering acts on messages while they wait there).
func MigrationTemp(after topology.Queue) topology.Queue {
	t := topology.Queue{Vhost: after.Vhost, Name: contract.MigrationQueue(after.Name), Durable: true}
	if after.QueueType() == "quorum" {
		t.Arguments = topology.Args{"x-queue-type": "quorum", "x-delivery-limit": int64(migrationDeliveryLimit)}
	}
	return t
}

// MigrateQueue re-creates a queue with the properties after, keeping its
// messages, while its publishers and consumers keep running. Every step
// reads where the migration stands from the broker, so a migration
// interrupted anywhere (even by kill -9) is finished by calling it again:
//
//  1. The temporary queue MigrationTemp(after) is declared; while it
//     exists a migration is in progress (plans resume it).
//  2. Unless the queue already has the new properties: every binding to
//     it (all but the default exchange's) is added to the temporary queue,
//     then removed from the queue, so what publishers route through
//     exchanges goes to the temporary queue from then on, once.
//  3. Its messages are moved to the temporary queue with confirms (see
//     Move), then it is deleted if empty (see deleteIfEmpty); not empty,
//     the move is repeated.
//  4. It is declared with after.
//  5. The temporary queue's bindings are added to it and then removed
//     from the temporary queue.
//  6. The temporary queue's messages are moved back, and the temporary
//     queue is deleted if empty.
func (s *Session) MigrateQueue(ctx context.Context, after topology.Queue) error {
	m := &migration{s: s, q: after, temp: MigrationTemp(after)}
	return m.run(ctx)
}

type migration struct {
	s       *Session
	q, temp topology.Queue
}

func (m *migration) hook(step string, moved int) {
	if m.s.MigrateHook != nil {
		m.s.MigrateHook(m.q.Name, step, moved)
	}
}

func (m *migration) run(ctx context.Context) error {
	cur, err := m.s.liveQueue(ctx, m.q.Vhost, m.q.Name)
	if err != nil {
		return err
	}
	temp, err := m.ensureTemp(ctx)
	if err != nil {
		return err
	}
	m.temp = temp
	m.hook(StepTemp, 0)
	if cur != nil && !sameQueue(*cur, m.q) {
		if err := m.moveBindings(ctx, *cur, m.temp); err != nil {
			return err
		}
		m.hook(StepBindTemp, 0)
		if err := m.drainAndDelete(ctx, *cur); err != nil {
			return err
		}
	}
	if err := m.s.DeclareQueue(ctx, m.q); err != nil {
		return fmt.Errorf("declare queue %q with its new properties: %w", m.q.Name, err)
	}
	m.hook(StepDeclare, 0)
	if err := m.moveBindings(ctx, m.temp, m.q); err != nil {
		return err
	}
	m.hook(StepRebind, 0)
	return m.finish(ctx)
}

// ensureTemp returns the temporary queue, declaring it unless it exists:
// one left by an interrupted migration is used as it is, whatever its
// type, because it holds messages.
func (m *migration) ensureTemp(ctx context.Context) (topology.Queue, error) {
	cur, err := m.s.liveQueue(ctx, m.temp.Vhost, m.temp.Name)
	if err != nil || cur != nil {
		return derefOr(cur, m.temp), err
	}
	if err := m.s.DeclareQueue(ctx, m.temp); err != nil {
		return m.temp, fmt.Errorf("declare the temporary queue %q: %w", m.temp.Name, err)
	}
	return m.temp, nil
}

func derefOr(q *topology.Queue, or topology.Queue) topology.Queue {
	if q == nil {
		return or
	}
	return *q
}

// drainAndDelete moves the old queue's messages out and deletes it once
// empty; the hook hears of the delete with the number moved.
func (m *migration) drainAndDelete(ctx context.Context, old topology.Queue) error {
	n, err := m.moveUntilDeleted(ctx, old, m.temp.Name, StepMoveOut, false)
	if err == nil {
		m.hook(StepDelete, n)
	}
	return err
}

// finish moves the messages back and deletes the temporary queue; the
// hook hears of the end with the number moved back.
func (m *migration) finish(ctx context.Context) error {
	n, err := m.moveUntilDeleted(ctx, m.temp, m.q.Name, StepMoveBack, true)
	if err == nil {
		m.hook(StepDone, n)
	}
	return err
}

// moveUntilDeleted moves the messages of from to the queue named to and
// deletes from once it is empty, moving again what arrived meanwhile.
// temp says from is the temporary queue, which nobody but a migration
// consumes: any consumer on it is a move, maybe of an interrupted run
// whose connection the broker has not closed yet, and holds messages.
// It returns the number of messages moved.
func (m *migration) moveUntilDeleted(ctx context.Context, from topology.Queue, to, step string, temp bool) (int, error) {
	total := 0
	for round := 0; ; round++ {
		_, consumers, err := m.s.queueStat(ctx, from.Vhost, from.Name)
		if errors.Is(err, ErrNotFound) {
			return total, nil
		}
		if err != nil {
			return total, fmt.Errorf("count the messages of queue %q: %w", from.Name, err)
		}
		if temp {
			consumers = 0
		}
		n, err := m.s.Move(ctx, from.Vhost, from.Name, to, func(n int) { m.hook(step, total+n) })
		total += n
		if err != nil {
			return total, fmt.Errorf("move the messages of queue %q to %q: %w", from.Name, to, err)
		}
		err = m.deleteIfEmpty(ctx, from, consumers, !temp)
		var held heldTooLong
		if err == nil || !errors.Is(err, ErrNotEmpty) || errors.As(err, &held) || round >= maxDrainRounds {
			return total, err
		}
	}
}

// settleTimeout bounds the wait for a quorum queue to take back the
// deliveries of a move's closed channel.
const settleTimeout = 30 * time.Second

// deleteIfEmpty deletes q if it has no ready message: atomically for a
// classic queue (if-empty), which takes back the deliveries of a closed
// channel before it handles a request sent after the close. A quorum queue refuses
// if-empty and takes deliveries back asynchronously: it is deleted once
// its consumers are down to the others' (before, counted when the move
// started: the move's consumer is gone, so the deliveries it held are
// back) and an exact count finds no ready message, and then once it holds
// nothing else either (noneHeld, when checkHeld: the temporary queue has
// no delayed retry, no dead-lettering and no consumer but the migration's
// own, so nothing to hold): no retry held back, no delivery that
// another consumer has not settled (the broker would cancel that consumer
// and drop what it holds with the queue), no held dead-letter.
func (m *migration) deleteIfEmpty(ctx context.Context, q topology.Queue, before int, checkHeld bool) error {
	if q.QueueType() == "classic" {
		err := m.s.deleteQueue(ctx, q, true)
		if err != nil && !errors.Is(err, ErrNotEmpty) {
			return fmt.Errorf("delete queue %q: %w", q.Name, err)
		}
		return err
	}
	deadline := time.Now().Add(settleTimeout)
	for {
		ready, consumers, err := m.s.queueStat(ctx, q.Vhost, q.Name)
		switch {
		case errors.Is(err, ErrNotFound):
			return nil
		case err != nil:
			return fmt.Errorf("count the messages of queue %q: %w", q.Name, err)
		case ready > 0:
			return &Error{Kind: ErrNotEmpty, Msg: fmt.Sprintf("queue %q holds %d messages", q.Name, ready)}
		case consumers > before && time.Now().Before(deadline):
			time.Sleep(20 * time.Millisecond)
			continue
		case consumers > before:
			return &Error{Kind: ErrNotEmpty, Msg: fmt.Sprintf(
				"queue %q has %d consumers, more than the %d before the move: deliveries of the move may not be back yet", q.Name, consumers, before)}
		}
		if err := ignoreNotFound(m.s.withChannel(ctx, q.Vhost, func(ch *amqp.Channel) error { return confirmEmpty(ch, q) })); err != nil {
			return err
		}
		if err := m.noneHeld(ctx, q, checkHeld); err != nil {
			return err
		}
		if err := m.s.deleteQueue(ctx, q, false); err != nil {
			return fmt.Errorf("delete queue %q: %w", q.Name, err)
		}
		return nil
	}
}

// queueStat reads the exact ready and consumer counts of a queue with a
// passive declare.
func (s *Session) queueStat(ctx context.Context, vhost, name string) (ready, consumers int, err error) {
	err = s.withChannel(ctx, vhost, func(ch *amqp.Channel) error {
		st, err := ch.QueueDeclarePassive(name, false, false, false, false, nil)
		ready, consumers = st.Messages, st.Consumers
		return err
	})
	return ready, consumers, err
}

// moveBindings adds every binding to from (but the default exchange's) to
// to, then removes them from from. Adding first means a message routed in
// between goes to both (a duplicate), never to neither; and an
// interruption leaves every binding on to, or on both, so that running it
// again finishes the job.
func (m *migration) moveBindings(ctx context.Context, from, to topology.Queue) error {
	bs, err := m.s.queueBindings(ctx, from)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list the bindings of queue %q: %w", from.Name, err)
	}
	for _, b := range bs {
		err := m.s.do(ctx, http.MethodPost, queueBindingPath(to, b), nil,
			map[string]any{"routing_key": b.RoutingKey, "arguments": b.args()}, nil)
		if err != nil {
			return fmt.Errorf("bind queue %q like queue %q (%s): %w", to.Name, from.Name, b, err)
		}
	}
	for _, b := range bs {
		err := ignoreNotFound(m.s.do(ctx, http.MethodDelete, queueBindingPath(from, b)+"/"+esc(b.PropertiesKey), nil, nil, nil))
		if err != nil {
			return fmt.Errorf("unbind queue %q (%s): %w", from.Name, b, err)
		}
	}
	return nil
}

// liveQueue reads a queue's properties as the definitions export shows
// them; nil when it does not exist.
func (c *Client) liveQueue(ctx context.Context, vhost, name string) (*topology.Queue, error) {
	var q struct {
		Durable    bool           `json:"durable"`
		AutoDelete bool           `json:"auto_delete"`
		Arguments  map[string]any `json:"arguments"`
	}
	err := c.do(ctx, http.MethodGet, "/api/queues/"+esc(vhost)+"/"+esc(name),
		url.Values{"columns": {"durable,auto_delete,arguments"}, "disable_stats": {"true"}}, nil, &q)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read queue %q: %w", name, err)
	}
	return &topology.Queue{Vhost: vhost, Name: name, Durable: q.Durable, AutoDelete: q.AutoDelete,
		Arguments: definitions.NormalizeQueueArgs(q.Arguments)}, nil
}

// sameQueue reports whether the broker would take a declaration of want
// as one of have.
func sameQueue(have, want topology.Queue) bool {
	want.Arguments = definitions.NormalizeQueueArgs(want.Arguments)
	return have.Durable == want.Durable && have.AutoDelete == want.AutoDelete &&
		reflect.DeepEqual(have.Arguments, want.Arguments)
}
