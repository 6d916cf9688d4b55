package main

import (
	"context"
	"errors"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/ops"
)

// opsConn is what the operations commands connect with: the management
// API for queue listings (broker.Client.ListQueues and GetQueue), and one
// AMQP connection per vhost for moves, through Session.Dial. Both classify
// their errors in internal/broker, like plan and apply.
type opsConn struct {
	client *broker.Client
	sess   *broker.Session // nil until dial
	// hide registers the session's secrets for scrubbing (env.hide).
	hide func(func() []string)
}

func (f *connFlags) ops(e *env) (*opsConn, error) {
	client, err := f.client(e)
	if err != nil {
		return nil, err
	}
	return &opsConn{client: client, hide: e.hide}, nil
}

// opsQueue is a queue of the management API's listing as ops takes it.
func opsQueue(q broker.QueueInfo) ops.Queue {
	return ops.Queue{Name: q.Name, Type: q.Type, Ready: q.Ready, DeliveryLimit: q.DeliveryLimit()}
}

// isOpsNotFound reports a missing queue or vhost, which callers turn into
// "queue X not found".
func isOpsNotFound(err error) bool {
	return errors.Is(err, broker.ErrNotFound) || errors.Is(err, broker.ErrVhostNotFound)
}

// dial opens an AMQP connection to vhost; the caller closes it.
func (o *opsConn) dial(ctx context.Context, vhost, purpose string) (*amqp.Connection, error) {
	if o.sess == nil {
		sess, err := o.client.NewSession(ctx)
		if err != nil {
			return nil, err
		}
		o.sess = sess
		o.hide(sess.Secrets)
	}
	return o.sess.Dial(vhost, purpose)
}
