package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/english"
	"github.com/rmqtopo/rmqtopo/topology"
)

// queueBinding is a binding to a queue as GET
// /api/queues/{vhost}/{name}/bindings reports it. Arguments are kept as
// the broker wrote them, so that a restore re-creates the same binding.
type queueBinding struct {
	Source        string          `json:"source"`
	RoutingKey    string          `json:"routing_key"`
	Arguments     json.RawMessage `json:"arguments"`
	PropertiesKey string          `json:"properties_key"`
}

func (b queueBinding) String() string {
	return fmt.Sprintf("%q -> key %q arguments %s", b.Source, b.RoutingKey, b.args())
}

func (b queueBinding) args() json.RawMessage {
	if len(b.Arguments) == 0 || string(b.Arguments) == "null" || string(b.Arguments) == "[]" {
		return json.RawMessage("{}")
	}
	return b.Arguments
}

// queueBindings lists the bindings to q that can be removed: all but the
// default exchange's. A missing queue is ErrNotFound.
func (s *Session) queueBindings(ctx context.Context, q topology.Queue) ([]queueBinding, error) {
	var all []queueBinding
	if err := s.do(ctx, http.MethodGet, "/api/queues/"+esc(q.Vhost)+"/"+esc(q.Name)+"/bindings", nil, nil, &all); err != nil {
		return nil, err
	}
	out := all[:0]
	for _, b := range all {
		if b.Source != "" {
			out = append(out, b)
		}
	}
	return out, nil
}

func queueBindingPath(q topology.Queue, b queueBinding) string {
	return "/api/bindings/" + esc(q.Vhost) + "/e/" + esc(b.Source) + "/q/" + esc(q.Name)
}

// deleteQueueGuarded is DeleteQueue's guard for non-classic queues.
func (s *Session) deleteQueueGuarded(ctx context.Context, q topology.Queue) error {
	bindings, err := s.queueBindings(ctx, q)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list the bindings of queue %q: %w", q.Name, err)
	}
	var cut []queueBinding
	for _, b := range bindings {
		if err := ignoreNotFound(s.do(ctx, http.MethodDelete, queueBindingPath(q, b)+"/"+esc(b.PropertiesKey), nil, nil, nil)); err != nil {
			return s.restoreBindings(ctx, q, cut, fmt.Errorf("unbind %s from queue %q: %w", b, q.Name, err))
		}
		cut = append(cut, b)
	}

	var st amqp.Queue
	err = s.withChannel(ctx, q.Vhost, func(ch *amqp.Channel) error {
		var err error
		st, err = ch.QueueDeclarePassive(q.Name, false, false, false, false, nil)
		if err == nil && st.Messages == 0 && st.Consumers == 0 {
			err = confirmEmpty(ch, q)
		}
		return err
	})
	switch {
	case errors.Is(err, ErrNotFound):
		return nil // deleted by someone else, with its bindings
	case err != nil:
		return s.restoreBindings(ctx, q, cut, err)
	case st.Consumers > 0:
		return s.restoreBindings(ctx, q, cut, &Error{Kind: ErrNotEmpty, Msg: fmt.Sprintf(
			"queue %q has %s, which may hold unacknowledged deliveries; stop them%s", q.Name, english.Count(st.Consumers, "consumer", "consumers"), hint(" or re-run with %s", s.cfg.Flags.AllowDestroy))})
	case st.Messages > 0:
		return s.restoreBindings(ctx, q, cut, &Error{Kind: ErrNotEmpty, Msg: fmt.Sprintf(
			"queue %q holds %s", q.Name, english.Count(st.Messages, "message", "messages"))})
	}
	if err := s.confirmNoneHeld(ctx, q); err != nil {
		return s.restoreBindings(ctx, q, cut, err)
	}

	again, err := s.queueBindings(ctx, q)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil
	case err != nil:
		return s.restoreBindings(ctx, q, cut, fmt.Errorf("list the bindings of queue %q: %w", q.Name, err))
	case len(again) > 0:
		return s.restoreBindings(ctx, q, cut, &Error{Kind: ErrNotEmpty, Msg: fmt.Sprintf(
			"queue %q was bound again (%s) by another client while rmqtopo checked it was empty; stop that client%s", q.Name, again[0], hint(" or re-run with %s", s.cfg.Flags.AllowDestroy))})
	}

	if err := s.deleteQueue(ctx, q, false); err != nil {
		return s.restoreBindings(ctx, q, cut, err)
	}
	return nil
}

// confirmEmpty asks a quorum queue that the broker counted empty for a
// message with basic.get, and returns ErrNotEmpty if it has one. RabbitMQ
// 3.10 answers a passive declare of a quorum queue with 0 messages and 0
// consumers when the queue's leader does not answer within 250 ms, or
// fails (rabbit_quorum_queue:stat/2), so a busy or re-electing queue
// counts empty; basic.get goes through the queue's log and says
// get-empty only when it is. A message got is given back at once (a
// quorum queue counts that as one delivery of it). Other types' counts
// are exact, and they are left alone.
func confirmEmpty(ch *amqp.Channel, q topology.Queue) error {
	if q.QueueType() != "quorum" {
		return nil
	}
	d, ok, err := ch.Get(q.Name, false)
	if err != nil || !ok {
		return err
	}
	if err := d.Nack(false, true); err != nil {
		return err
	}
	return &Error{Kind: ErrNotEmpty, Msg: fmt.Sprintf(
		"queue %q holds messages, though the broker counted none (a quorum queue whose leader is busy or being elected counts 0)", q.Name)}
}

// restoreBindings re-creates the bindings the guard removed from q and
// returns cause, with the bindings it could not restore named in it. It
// runs even when ctx is done, so that an interrupt does not leave the
// queue cut off; a missing queue or exchange ends a restore quietly.
func (s *Session) restoreBindings(ctx context.Context, q topology.Queue, cut []queueBinding, cause error) error {
	ctx = context.WithoutCancel(ctx)
	var failed []string
	var first error
	for _, b := range cut {
		err := ignoreNotFound(s.do(ctx, http.MethodPost, queueBindingPath(q, b), nil,
			map[string]any{"routing_key": b.RoutingKey, "arguments": b.args()}, nil))
		if err != nil {
			failed = append(failed, b.String())
			if first == nil {
				first = err
			}
		}
	}
	if len(failed) == 0 {
		return cause
	}
	return fmt.Errorf("%w; and restoring %d of the bindings removed from queue %q failed (%v), re-create them: %s",
		cause, len(failed), q.Name, first, strings.Join(failed, "; "))
}

// DeleteQueue deletes q; a missing queue is success. With ifEmpty (apply
// without --allow-destroy) a queue that may hold messages is kept and the
// error is ErrNotEmpty.
//
// Classic queues are checked atomically by the broker's if-empty (ready
// messages only, as RabbitMQ defines it). Quorum and other non-classic
// queues refuse if-empty (a connection error on 3.x), so for them the
// guard is done here, in four steps:
//
//  1. Every binding to the queue except the default exchange's (which
//     cannot be removed) is removed, read in one call from the management
//     API, so that nothing routed through an exchange, dead-lettering
//     through a dead-letter exchange included, can arrive any more.
//  2. A passive declare reads the exact count of ready messages and of
//     consumers. Any message refuses; so does any consumer, because a
//     consumer may hold deliveries not yet acknowledged, which the count
//     leaves out and the delete would drop. A quorum queue without either
//     is then asked for what it holds beyond its ready messages (retries
//     held back for a delayed retry, dead-letters awaiting their target's
//     confirm, deliveries fetched by basic.get): its total from statistics
//     written after this step began (freshTotals). Any refuses; a total
//     that does not renew in time refuses too.
//  3. The bindings are listed again: one that another client added since
//     step 1 refuses too.
//  4. The queue is deleted.
//
// A refusal, or any failure before the delete completes, re-creates the
// bindings removed in step 1 before returning, so a refused apply leaves
// routing as it found it; a failure to restore them is part of the error
// and names them. They are re-created from the management API's JSON:
// same source, routing key and argument values, but an argument of an
// AMQP type that JSON does not carry comes back as the type the API maps
// its JSON value to: a 32-bit integer becomes a 64-bit one. Headers
// matching compares values, so routing is unchanged; the bindings rmqtopo
// itself creates round-trip exactly. A replace re-creates its desired bindings later in the same
// apply anyway (see apply's phases).
//
// What the guard cannot see, and a delete can still lose:
//   - a message published straight to the queue by name through the
//     default exchange between the count (step 2) and the delete (step 4),
//     by a client or by another queue dead-lettering to it with
//     x-dead-letter-exchange "" and its name as routing key: the default
//     exchange's binding cannot be removed;
//   - a message the broker routed through a binding just before step 1
//     that was still on its way to the queue's leader when it was counted;
//   - a binding added after step 3, and what it routes before the delete;
//   - deliveries not yet acknowledged on a channel with no consumer on the
//     queue any more: fetched with basic.get, or left by a cancelled
//     consumer whose channel is still open.
func (s *Session) DeleteQueue(ctx context.Context, q topology.Queue, ifEmpty bool) error {
	if ifEmpty && q.QueueType() != "classic" {
		return s.deleteQueueGuarded(ctx, q)
	}
	return s.deleteQueue(ctx, q, ifEmpty)
}

// deleteQueue deletes q with or without the broker's if-empty; a missing
// queue is success.
func (s *Session) deleteQueue(ctx context.Context, q topology.Queue, ifEmpty bool) error {
	return s.objects.DeleteQueue(ctx, q, ifEmpty)
}
