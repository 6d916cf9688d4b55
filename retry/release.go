package retry

import (
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/rabbitmq"
)

// brokerProfile is the release profile of the broker conn is open to, by
// the version it announces in its server properties; not Known when it
// announces none the profiles read.
func brokerProfile(conn *amqp.Connection) rabbitmq.Profile {
	v, _ := conn.Properties["version"].(string)
	p, _ := rabbitmq.ProfileOf(v)
	return p
}

// nativeOf is readNative on a broker whose release can delay retries
// inside a queue (its profile's NativeDelayedRetry), or whose release is
// unknown; on any other no queue is native, and it says why without
// opening an AMQP 1.0 connection (which 3.x does not speak on the AMQP
// port).
func nativeOf(conn *amqp.Connection, login *login, queue string) (n *contract.Native, apart bool, err error) {
	if p := brokerProfile(conn); p.Known() && !p.NativeDelayedRetry() {
		return nil, false, fmt.Errorf("RabbitMQ %s delays no retries inside a queue; the native layout needs %s",
			p.Version(), rabbitmq.First(rabbitmq.Profile.NativeDelayedRetry))
	}
	n, apart, err = readNative(conn, login, queue)
	if err != nil {
		return nil, false, fmt.Errorf("reading its arguments over AMQP 1.0: %w", err)
	}
	return n, apart, nil
}
