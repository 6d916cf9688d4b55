package brokertest

import (
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Declare declares t's exchanges, queues and bindings over AMQP on ch, for
// tests that need a topology without running apply (policies and vhosts
// are left out). It fails the test on the first refusal.
func Declare(tb testing.TB, ch *amqp.Channel, t topology.Topology) {
	tb.Helper()
	for _, e := range t.Exchanges {
		if err := ch.ExchangeDeclare(e.Name, e.Type, e.Durable, e.AutoDelete, e.Internal, false, broker.AMQPTable(e.Arguments)); err != nil {
			tb.Fatalf("brokertest: declaring exchange %q: %v", e.Name, err)
		}
	}
	for _, q := range t.Queues {
		if _, err := ch.QueueDeclare(q.Name, q.Durable, q.AutoDelete, false, false, broker.AMQPTable(q.Arguments)); err != nil {
			tb.Fatalf("brokertest: declaring queue %q: %v", q.Name, err)
		}
	}
	for _, bd := range t.Bindings {
		var err error
		if bd.DestinationType == topology.DestExchange {
			err = ch.ExchangeBind(bd.Destination, bd.RoutingKey, bd.Source, false, broker.AMQPTable(bd.Arguments))
		} else {
			err = ch.QueueBind(bd.Destination, bd.RoutingKey, bd.Source, false, broker.AMQPTable(bd.Arguments))
		}
		if err != nil {
			tb.Fatalf("brokertest: declaring binding %s: %v", bd.Addr(), err)
		}
	}
}
