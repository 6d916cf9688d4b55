package move_test

import (
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestCancelKeepsDeliveries checks, per queue type, the broker's and the
// client's part of the drain check of a move until empty (see
// consumer.drain): after Cancel (which waits for basic.cancel-ok), the
// consumer's delivery channel yields every delivery the broker sent it,
// then closes; the deliveries it holds stay with the channel, unacked,
// not requeued by the cancel; acking them settles them. A quorum queue
// counts the cancelled consumer until they are settled, a classic queue
// drops it at once.
func TestCancelKeepsDeliveries(t *testing.T) {
	for _, typ := range queueTypes {
		t.Run(typ, func(t *testing.T) {
			e := newEnv(t)
			e.declare("src", typ, nil)
			e.publish("src", 20)
			ch, err := e.conn.Channel()
			if err != nil {
				t.Fatal(err)
			}
			if err := ch.Qos(5, 0, false); err != nil {
				t.Fatal(err)
			}
			deliveries, err := ch.Consume("src", "c", false, false, false, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			e.waitFor("a full window to leave the queue", func() bool {
				ready, _, _ := e.stat("src")
				return ready == 15
			})
			if err := ch.Cancel("c", false); err != nil {
				t.Fatalf("Cancel: %v", err)
			}
			var got []amqp.Delivery
			for d := range deliveries {
				got = append(got, d)
			}
			if len(got) != 5 {
				t.Fatalf("got %d deliveries after the cancel, want the window of 5", len(got))
			}
			held := map[string]int{"classic": 0, "quorum": 1}[typ]
			if ready, consumers, _ := e.stat("src"); ready != 15 || consumers != held {
				t.Errorf("after the cancel the queue has %d ready, %d consumers; want 15 and %d", ready, consumers, held)
			}
			if err := ch.Ack(got[4].DeliveryTag, true); err != nil {
				t.Fatal(err)
			}
			same(t, "source", ids(5, 20, nil), e.read("src"))
			if err := ch.Close(); err != nil {
				t.Errorf("closing the channel: %v (an ack of a requeued message closes it)", err)
			}
		})
	}
}
