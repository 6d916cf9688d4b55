package broker

import (
	"context"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/definitions"
	"github.com/rmqtopo/rmqtopo/topology"
)

// amqpObjects writes exchanges, queues and bindings over AMQP, on the
// session's pooled channels: the Session's objectWriter unless it uses
// the management API.
type amqpObjects struct{ s *Session }

// DeclareExchange declares e; an identical exchange is success, a
// different one ErrInequivalent.
func (w amqpObjects) DeclareExchange(ctx context.Context, e topology.Exchange) error {
	return w.s.withChannel(ctx, e.Vhost, func(ch *amqp.Channel) error {
		return ch.ExchangeDeclare(e.Name, e.Type, e.Durable, e.AutoDelete, e.Internal, false, AMQPTable(e.Arguments))
	})
}

// DeclareQueue declares q; an identical queue is success, a different one
// ErrInequivalent.
func (w amqpObjects) DeclareQueue(ctx context.Context, q topology.Queue) error {
	return w.s.withChannel(ctx, q.Vhost, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(q.Name, q.Durable, q.AutoDelete, false, false, AMQPTable(definitions.DeclareArgs(q)))
		return err
	})
}

// Bind creates b; an existing identical binding is success.
func (w amqpObjects) Bind(ctx context.Context, b topology.Binding) error {
	return w.s.withChannel(ctx, b.Vhost, func(ch *amqp.Channel) error {
		if b.DestinationType == topology.DestExchange {
			return ch.ExchangeBind(b.Destination, b.RoutingKey, b.Source, false, AMQPTable(b.Arguments))
		}
		return ch.QueueBind(b.Destination, b.RoutingKey, b.Source, false, AMQPTable(b.Arguments))
	})
}

// Unbind deletes b; a missing binding, source or destination is success.
func (w amqpObjects) Unbind(ctx context.Context, b topology.Binding) error {
	return ignoreNotFound(w.s.withChannel(ctx, b.Vhost, func(ch *amqp.Channel) error {
		if b.DestinationType == topology.DestExchange {
			return ch.ExchangeUnbind(b.Destination, b.RoutingKey, b.Source, false, AMQPTable(b.Arguments))
		}
		return ch.QueueUnbind(b.Destination, b.RoutingKey, b.Source, AMQPTable(b.Arguments))
	}))
}

// DeleteExchange deletes an exchange with its bindings; a missing one is
// success.
func (w amqpObjects) DeleteExchange(ctx context.Context, vhost, name string) error {
	return ignoreNotFound(w.s.withChannel(ctx, vhost, func(ch *amqp.Channel) error {
		return ch.ExchangeDelete(name, false, false)
	}))
}

// DeleteQueue deletes q with or without the broker's if-empty; a missing
// queue is success.
func (w amqpObjects) DeleteQueue(ctx context.Context, q topology.Queue, ifEmpty bool) error {
	return ignoreNotFound(w.s.withChannel(ctx, q.Vhost, func(ch *amqp.Channel) error {
		_, err := ch.QueueDelete(q.Name, false, ifEmpty, false)
		return err
	}))
}
