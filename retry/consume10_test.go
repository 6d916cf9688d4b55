package retry

import (
	"testing"

	amqp10 "github.com/Azure/go-amqp"
	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
)

// TestDelivery10Headers: a message received over AMQP 1.0 reaches the
// handler with the headers a 0.9.1 consumer of it gets from RabbitMQ 4.3
// (seen on 4.3.6 for a retry held with x-opt-delivery-time): application
// properties and "x-" annotations, but the exchange and routing key,
// which are fields of their own; the delivery count from the header.
func TestDelivery10Headers(t *testing.T) {
	msg := &amqp10.Message{
		Header:                &amqp10.MessageHeader{DeliveryCount: 2, Durable: true},
		Properties:            &amqp10.MessageProperties{MessageID: "m1"},
		ApplicationProperties: map[string]any{"tenant": "a"},
		Annotations: amqp10.Annotations{
			"x-exchange": "orders", "x-routing-key": "k", "x-opt-delivery-time": int64(1795776413466),
			"x-acquired-count": int64(2), "x-delivery-count": int64(2), "not-x": "dropped",
		},
	}
	d := delivery10(nil, msg)
	want := amqp.Table{"tenant": "a", "x-opt-delivery-time": int64(1795776413466), "x-acquired-count": int64(2),
		contract.HeaderDeliveryCount: int64(2)}
	if diff := cmp.Diff(want, d.Headers); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
	if d.Exchange != "orders" || d.RoutingKey != "k" || d.MessageId != "m1" || !d.Redelivered || d.DeliveryMode != amqp.Persistent {
		t.Errorf("delivery fields: %+v", d)
	}
}
