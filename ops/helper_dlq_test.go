package ops

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
)

// helperTopology declares what rmqtopo provisions for work queue "orders"
// (contract package doc): the retry exchange (no alternate exchange), one
// immediate retry, the DLX bound to the DLQ, and a parking lot.
func helperTopology(t *testing.T, conn *amqp.Connection) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	q := "orders"
	must(ch.ExchangeDeclare(contract.DeadLetterExchange(q), "fanout", true, false, false, false, nil))
	must(ch.ExchangeDeclare(contract.RetryExchange(q), "headers", true, false, false, false, nil))
	declare(t, conn, q, "quorum", amqp.Table{"x-dead-letter-exchange": contract.DeadLetterExchange(q)})
	declare(t, conn, contract.DeadLetterQueue(q), "quorum", nil)
	declare(t, conn, contract.ParkingLotQueue(q), "quorum", nil)
	must(ch.QueueBind(contract.DeadLetterQueue(q), "", contract.DeadLetterExchange(q), false, nil))
	must(ch.QueueBind(q, "", contract.RetryExchange(q), false, amqp.Table(contract.AttemptBindingArgs(2))))
}

// helperDeadLetter publishes m the way package retry dead-letters a
// delivery of "orders" (retry/message.go republishing, retry/settle.go
// deadLetter): the application's headers kept, the failure headers added,
// the reason (rejected, or exhausted once the retry exchange returned the
// next attempt), to the DLX. Without a reason it publishes the next attempt
// to the retry exchange instead, which has no binding for it (and, unlike
// the topologies of earlier rmqtopo versions, no alternate exchange).
func helperDeadLetter(t *testing.T, conn *amqp.Connection, id string, app amqp.Table, reason string, attempt int) {
	t.Helper()
	h := amqp.Table{
		contract.HeaderFirstFailure:       "2026-01-02T03:04:05.123456789Z",
		contract.HeaderLastError:          "boom: " + id,
		contract.HeaderOriginalExchange:   "shop",
		contract.HeaderOriginalRoutingKey: "order.created",
		contract.HeaderAttempt:            contract.AttemptValue(attempt),
	}
	for k, v := range app {
		h[k] = v
	}
	exchange := contract.RetryExchange("orders")
	if reason != "" {
		h[contract.HeaderDeadLetterReason] = reason
		exchange = contract.DeadLetterExchange("orders")
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), exchange, "orders", true, false, amqp.Publishing{
		MessageId: id, Headers: h, DeliveryMode: amqp.Persistent, ContentType: "application/json", Body: []byte(`{"id":"` + id + `"}`),
	})
	if err != nil || !dc.Wait() {
		t.Fatalf("publishing %s: %v (or nacked)", id, err)
	}
}

// TestHelperDLQ replays and sweeps the retry helper's own DLQ: x-death is
// absent there, so deaths come from rmqtopo's headers; a dry run moves
// nothing; sweep keeps every header but the broker's delivery counts, and
// replay every header but the attempt, the reason and the broker's
// dead-lettering headers, and says which it dropped.
func TestHelperDLQ(t *testing.T) {
	b := brokertest.Get(t)
	vhost := b.NewVhost(t)
	conn := b.Dial(t, vhost)
	helperTopology(t, conn)
	app := func(i string) amqp.Table {
		return amqp.Table{"tenant": "acme", "trace-id": "t-" + i, "priority-class": int32(7)}
	}
	helperDeadLetter(t, conn, "rejected", app("1"), contract.ReasonRejected, 2)
	helperDeadLetter(t, conn, "exhausted", app("2"), contract.ReasonExhausted, 4)
	replayed := app("3")
	replayed[contract.HeaderReplayCount] = "2" // died, replayed twice, died again
	helperDeadLetter(t, conn, "again", replayed, contract.ReasonRejected, 1)
	for b.QueueDepth(t, vhost, "orders.dlq") < 3 {
		time.Sleep(20 * time.Millisecond)
	}
	ctx := context.Background()
	dlq := SweepSource{Queue: queueInfo(t, b, vhost, "orders.dlq"), Target: "orders.parking-lot"}

	// Every message died at least once: a dry run would move all three.
	res, err := SweepQueue(ctx, conn, dlq, SweepRun{MaxDeaths: 0, DryRun: true})
	if err != nil || res.Moved != 0 || res.LeftBy[NoteWouldMove] != 3 {
		t.Fatalf("dry-run sweep: %+v, %v; want 3 that would move, none moved", res, err)
	}
	// Only "again" died more than once (3 times).
	res, err = SweepQueue(ctx, conn, dlq, SweepRun{MaxDeaths: 1})
	if err != nil || res.Moved != 1 || len(res.ResetHeaders) != 0 {
		t.Fatalf("sweep: %+v, %v; want 1 moved, no header reset", res, err)
	}
	swept := brokertest.Drain(t, conn, "orders.parking-lot", 1, 10*time.Second)
	want := helperHeaders("again", replayed, contract.ReasonRejected, 1)
	if diff := cmp.Diff(want, firstDelivery(t, swept[0].Headers)); diff != "" {
		t.Errorf("swept headers (-want +got):\n%s", diff)
	}

	// A missing target is an error unless the caller allows creating it.
	if _, err := SweepQueue(ctx, conn, SweepSource{Queue: dlq.Queue, Target: "nowhere"}, SweepRun{}); err == nil {
		t.Errorf("sweep to a missing target without CreateTarget: no error")
	}

	res, err = Replay(ctx, conn, ReplayOptions{Queue: "orders.dlq", QueueType: "quorum", DryRun: true})
	if err != nil || res.Moved != 0 || res.LeftBy[NoteWouldMove] != 2 {
		t.Fatalf("dry-run replay: %+v, %v; want 2 that would move", res, err)
	}
	now := time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC)
	res, err = Replay(ctx, conn, ReplayOptions{Queue: "orders.dlq", QueueType: "quorum", Now: func() time.Time { return now }})
	if err != nil || res.Moved != 2 {
		t.Fatalf("replay: %+v, %v; want 2 moved", res, err)
	}
	// The dry runs' requeues gave the quorum DLQ's messages a delivery
	// count (x-delivery-count before RabbitMQ 4.3, x-acquired-count from
	// 4.3); replay drops it with the rest of the broker's headers.
	for _, h := range []string{contract.HeaderAttempt, contract.HeaderDeadLetterReason} {
		if !slices.Contains(res.ResetHeaders, h) {
			t.Errorf("replay reset %v, not %s", res.ResetHeaders, h)
		}
	}
	for _, d := range brokertest.Drain(t, conn, "orders", 2, 10*time.Second) {
		reason := map[string]string{"rejected": contract.ReasonRejected, "exhausted": contract.ReasonExhausted}[d.MessageId]
		attempt := map[string]int{"rejected": 2, "exhausted": 4}[d.MessageId]
		app := app(map[string]string{"rejected": "1", "exhausted": "2"}[d.MessageId])
		want := helperHeaders(d.MessageId, app, reason, attempt)
		delete(want, contract.HeaderAttempt)
		delete(want, contract.HeaderDeadLetterReason)
		want[contract.HeaderReplayCount] = "1"
		want[contract.HeaderReplayedAt] = "2026-02-03T04:05:06Z"
		if diff := cmp.Diff(want, firstDelivery(t, d.Headers)); diff != "" {
			t.Errorf("replayed headers of %s (-want +got):\n%s", d.MessageId, diff)
		}
	}
}

// helperHeaders are the headers helperDeadLetter publishes.
func helperHeaders(id string, app amqp.Table, reason string, attempt int) amqp.Table {
	h := amqp.Table{
		contract.HeaderFirstFailure:       "2026-01-02T03:04:05.123456789Z",
		contract.HeaderLastError:          "boom: " + id,
		contract.HeaderOriginalExchange:   "shop",
		contract.HeaderOriginalRoutingKey: "order.created",
		contract.HeaderAttempt:            contract.AttemptValue(attempt),
	}
	for k, v := range app {
		h[k] = v
	}
	if reason != "" {
		h[contract.HeaderDeadLetterReason] = reason
	}
	return h
}

// firstDelivery checks that the delivery counts of a copy's headers
// (contract.DeliveryHeaders) are those of a first delivery, 0 or absent
// (3.10 sets x-delivery-count 0 on it): none was carried over from the
// source, which had delivered the message before. It returns the headers
// without them.
func firstDelivery(t *testing.T, h amqp.Table) amqp.Table {
	t.Helper()
	out := amqp.Table{}
	for k, v := range h {
		if !contract.DeliveryHeaders(k) {
			out[k] = v
		} else if n, ok := contract.Integer(v); !ok || n != 0 {
			t.Errorf("a copy's first delivery has %s %v: carried over from its source", k, v)
		}
	}
	return out
}

func queueInfo(t *testing.T, b *brokertest.Broker, vhost, name string) Queue {
	t.Helper()
	q, err := client(t, b).GetQueue(context.Background(), vhost, name)
	if err != nil {
		t.Fatal(err)
	}
	return queueOf(q)
}
