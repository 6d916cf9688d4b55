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
			ch := e.channel(5)
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

// TestCancelRacingDeliveries cancels a consumer as soon as it started,
// while the broker is sending it its first window (of 100), forty times
// per queue type. Whatever the race, the delivery channel yields
// deliveries 1, 2, 3... and closes; once they are acked and the queue
// counts no consumer (the channel still open), every other message is
// ready: none was sent after cancel-ok and dropped by the client, which
// would stay unacked, and counted, until the channel closed. A quorum queue's channel returns
// to the queue the deliveries it had not passed on when the cancel came;
// right after cancel-ok they are neither ready nor received, which is why
// the drain check waits for the consumer count (run.settledReady). The
// test logs how often that happened.
func TestCancelRacingDeliveries(t *testing.T) {
	for _, typ := range queueTypes {
		t.Run(typ, func(t *testing.T) {
			e := newEnv(t)
			e.declare("src", typ, nil)
			total, returning := 0, 0
			for round := range 40 {
				if total < 150 {
					e.publish("src", 200)
					total += 200
				}
				ch := e.channel(100)
				got, readyAtCancel := e.cancelRacing(ch, "src")
				if readyAtCancel+got < total {
					returning++
				}
				total -= got
				e.waitFor("the cancelled consumer to go", func() bool {
					_, consumers, _ := e.stat("src")
					return consumers == 0
				})
				if ready, _, _ := e.stat("src"); ready != total {
					t.Fatalf("round %d: %d ready once settled, want %d", round, ready, total)
				}
				ch.Close()
			}
			t.Logf("%d of 40 cancels found deliveries on their way back to the queue", returning)
		})
	}
}

// channel opens a channel with a prefetch of window.
func (e *env) channel(window int) *amqp.Channel {
	e.t.Helper()
	ch, err := e.conn.Channel()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := ch.Qos(window, 0, false); err != nil {
		e.t.Fatal(err)
	}
	return ch
}

// cancelRacing consumes from queue on ch and cancels at once, acks every
// delivery the consumer got, and returns how many it got and the queue's
// ready count right after the cancel.
func (e *env) cancelRacing(ch *amqp.Channel, queue string) (got, readyAtCancel int) {
	e.t.Helper()
	deliveries, err := ch.Consume(queue, "racing", false, false, false, false, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := ch.Cancel("racing", false); err != nil {
		e.t.Fatalf("Cancel: %v", err)
	}
	for d := range deliveries {
		got++
		if d.DeliveryTag != uint64(got) {
			e.t.Fatalf("delivery %d has tag %d", got, d.DeliveryTag)
		}
	}
	readyAtCancel, _, _ = e.stat(queue)
	if got > 0 {
		if err := ch.Ack(uint64(got), true); err != nil {
			e.t.Fatal(err)
		}
	}
	return got, readyAtCancel
}
