package brokertest

import (
	"context"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// quorumProbe is the quorum queue WaitQuorumReady declares and deletes.
const quorumProbe = "brokertest.quorum-ready"

// WaitQuorumReady declares, through b, a quorum queue with a member on each
// of size nodes, and deletes it, until that works or ctx ends; it returns
// how many tries failed first. A node answers the management API and AMQP
// before it can: a cluster's first apply, right after the nodes booted
// together, failed with INTERNAL_ERROR (the replicas could not all start)
// in CI, and so did one through a node just restarted on a loaded machine.
func (b *Broker) WaitQuorumReady(ctx context.Context, size int) (int, error) {
	var err error
	for tries := 0; ; tries++ {
		var conn *amqp.Connection
		if conn, err = amqp.Dial(b.AMQPURL); err == nil {
			err = declareQuorumAndDelete(conn, quorumProbe, size)
			conn.Close()
		}
		if err == nil {
			return tries, nil
		}
		select {
		case <-ctx.Done():
			return tries, fmt.Errorf("brokertest: %s cannot declare a quorum queue of %d members: %w", b.AMQPURL, size, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// declareQuorumAndDelete declares the quorum queue name, with a member on
// each of size nodes, in the default vhost, and deletes it.
func declareQuorumAndDelete(conn *amqp.Connection, name string, size int) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	args := amqp.Table{"x-queue-type": "quorum", "x-quorum-initial-group-size": size}
	if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		return err
	}
	_, err = ch.QueueDelete(name, false, false, false)
	return err
}
