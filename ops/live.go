package ops

import (
	"context"
	"errors"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Endpoint is where the dead-letter commands (Show, ReplayQueue, Sweep)
// read what they need to know of queues and open their AMQP connections.
type Endpoint interface {
	// Version is the broker's RabbitMQ version (see CheckLeaveSafe).
	Version(ctx context.Context) (topology.Version, error)
	// Queue reads one queue of vhost, Queues all of them; a missing queue
	// or vhost is an error that wraps ErrNotFound.
	Queue(ctx context.Context, vhost, name string) (Queue, error)
	Queues(ctx context.Context, vhost string) ([]Queue, error)
	// Dial opens an AMQP connection to vhost; the caller closes it.
	Dial(ctx context.Context, vhost, purpose string) (*amqp.Connection, error)
}

// ErrNotFound is an Endpoint's error for a missing queue or vhost.
var ErrNotFound = errors.New("not found")

// Live is the Endpoint of a management API client, which classifies its
// errors like plan and apply do. Its AMQP connections come from one
// session, opened at the first Dial and handed to opened (the CLI scrubs
// the session's secrets from its errors).
func Live(client *broker.Client, opened func(*broker.Session)) Endpoint {
	return &live{client: client, opened: opened}
}

type live struct {
	client *broker.Client
	sess   *broker.Session // nil until the first Dial
	opened func(*broker.Session)
}

func (l *live) Version(ctx context.Context) (topology.Version, error) {
	return l.client.Version(ctx)
}

func (l *live) Queue(ctx context.Context, vhost, name string) (Queue, error) {
	info, err := l.client.GetQueue(ctx, vhost, name)
	return queueOf(info), found(err)
}

func (l *live) Queues(ctx context.Context, vhost string) ([]Queue, error) {
	infos, err := l.client.ListQueues(ctx, vhost)
	queues := make([]Queue, len(infos))
	for i, q := range infos {
		queues[i] = queueOf(q)
	}
	return queues, found(err)
}

func (l *live) Dial(ctx context.Context, vhost, purpose string) (*amqp.Connection, error) {
	if l.sess == nil {
		sess, err := l.client.NewSession(ctx)
		if err != nil {
			return nil, err
		}
		l.sess = sess
		if l.opened != nil {
			l.opened(sess)
		}
	}
	return l.sess.Dial(vhost, purpose)
}

// queueOf is a queue of the management API's listing as ops takes it.
func queueOf(q broker.QueueInfo) Queue {
	return Queue{Name: q.Name, Type: q.Type, Ready: q.Ready, DeliveryLimits: q.DeliveryLimits()}
}

// found marks the management API's "no such queue or vhost" as
// ErrNotFound.
func found(err error) error {
	if errors.Is(err, broker.ErrNotFound) || errors.Is(err, broker.ErrVhostNotFound) {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}
