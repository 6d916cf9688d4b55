package main

import (
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/topology"
)

// TestDLQCommandsRefuseLowDeliveryLimit holds ops.CheckLeaveSafe against
// the broker. A poison message dies of its work queue's delivery limit
// (10) into a DLQ whose own limit is lower (5). The dlq commands refuse
// that DLQ and leave the message alone, on every version; and reading it
// the way a pass does (basic.get, then basic.nack with requeue) does lose
// it: before 4.3 because every requeue counts one delivery, from 4.3
// because the message keeps its delivery count (11) across
// dead-lettering, past the DLQ's limit, so the first requeue drops it. The
// same message in a DLQ as rmqtopo declares them stays through repeated
// reads. A quorum DLQ declared with no limit at all is refused from 4.0
// (a limit of 20 by default), not on 3.x (no limit).
func TestDLQCommandsRefuseLowDeliveryLimit(t *testing.T) {
	b := brokertest.Get(t)
	version, err := topology.ParseVersion(b.Version(t))
	if err != nil {
		t.Fatal(err)
	}
	vhost := b.NewVhost(t)
	conn := b.Dial(t, vhost)
	declareArgs(t, conn, "low.dlq", amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int64(5)})
	declareDLQ(t, conn, "own.dlq", "quorum")
	declareQueue(t, conn, "plain.dlq", "quorum")
	for _, dlq := range []string{"low.dlq", "own.dlq"} {
		work := strings.TrimSuffix(dlq, ".dlq")
		declareArgs(t, conn, work, amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int64(10),
			"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
		publishN(t, conn, work, "poison-"+work, 1, nil)
		if n := requeueUntilGone(t, conn, work, 20, reject); n != 11 {
			t.Fatalf("the work queue %q delivered its poison message %d times, want 11 (limit 10)", work, n)
		}
		waitQueueDepth(t, b, vhost, dlq, 1)
	}

	for _, cmd := range [][]string{
		{"dlq", "show", "low.dlq"},
		{"dlq", "replay", "low.dlq", "--to", "own"},
		{"dlq", "sweep", "--pattern", "low.*", "--max-deaths", "0", "--to", "x.{name}", "--unmanaged-target"},
	} {
		_, errs, code := runCLI(t, args(b, append(cmd, "--vhost", vhost)...)...)
		want := `queue "low.dlq" is a quorum queue with a delivery limit of 5: `
		if code != 1 || !strings.Contains(errs, want) {
			t.Errorf("%s: exit %d, stderr %q; want exit 1 and %q", strings.Join(cmd, " "), code, errs, want)
		}
	}
	if n := b.QueueDepth(t, vhost, "low.dlq"); n != 1 {
		t.Fatalf("low.dlq holds %d messages after the refused commands, want its 1", n)
	}
	// What the refusal prevents: reading and requeueing loses the message.
	n := requeueUntilGone(t, conn, "low.dlq", 10, nack)
	wantReads := 6 // every requeue counts: 5 kept, the 6th past the limit
	if version.AtLeast(4, 3) {
		wantReads = 1 // its count of 11 came along: the first requeue drops it
	}
	if n != wantReads {
		t.Errorf("RabbitMQ %s: read and requeued the poison message %d times before it was gone, want %d; if the broker keeps it now, ops.CheckLeaveSafe may refuse less", version, n, wantReads)
	}

	for i := 0; i < 3; i++ {
		if _, errs, code := runCLI(t, args(b, "dlq", "show", "own.dlq", "--vhost", vhost)...); code != 0 {
			t.Fatalf("dlq show own.dlq exited %d: %s", code, errs)
		}
	}
	if n := b.QueueDepth(t, vhost, "own.dlq"); n != 1 {
		t.Errorf("own.dlq holds %d messages after 3 dlq show, want its 1", n)
	}

	_, errs, code := runCLI(t, args(b, "dlq", "show", "plain.dlq", "--vhost", vhost)...)
	if version.Major >= 4 {
		if want := `queue "plain.dlq" is a quorum queue with a delivery limit of 20: `; code != 1 || !strings.Contains(errs, want) {
			t.Errorf("RabbitMQ %s: dlq show of a quorum queue without a limit: exit %d, %q; want exit 1 and %q", version, code, errs, want)
		}
	} else if code != 0 {
		t.Errorf("RabbitMQ %s: dlq show of a quorum queue without a limit (none on 3.x) exited %d: %s", version, code, errs)
	}
}

// requeueUntilGone reads queue's head with basic.get and gives it back
// with settle (a requeue) until the queue is empty, at most max times, and
// returns how many times it read a message.
func requeueUntilGone(t *testing.T, conn *amqp.Connection, queue string, max int, settle func(*amqp.Delivery) error) int {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	reads := 0
	for reads < max {
		d, ok, err := getSettled(ch, queue)
		if err != nil {
			t.Fatalf("basic.get from %q: %v", queue, err)
		}
		if !ok {
			return reads
		}
		reads++
		if err := settle(&d); err != nil {
			t.Fatalf("requeueing %q's message: %v", queue, err)
		}
	}
	t.Fatalf("%q still holds its message after %d reads", queue, max)
	return reads
}

// reject and nack requeue a delivery the two ways AMQP 0-9-1 has; a pass
// nacks.
func reject(d *amqp.Delivery) error { return d.Reject(true) }
func nack(d *amqp.Delivery) error   { return d.Nack(false, true) }

// getSettled is a basic.get that gives a message requeued a moment ago
// the time to come back: a quorum queue applies requeues lazily, so a get
// right after one can find the queue empty. A message not back within the
// guard is gone.
func getSettled(ch *amqp.Channel, queue string) (amqp.Delivery, bool, error) {
	// One basic.get says it: an empty answer means the message is gone,
	// not that its requeue is still on the way. The requeue (a nack or a
	// reject) and the get go out on one channel, and the quorum queue's
	// client sends the return to the leader at normal priority before the
	// get's dequeue, a synchronous command to the same leader, which
	// applies them in order (rabbit_fifo_client.erl, return/3 and
	// dequeue/4). Polling on an empty answer waited out a 30 s guard per
	// call: 90 s of this package's run.
	return ch.Get(queue, false)
}

// waitQueueDepth waits until queue holds n ready messages.
func waitQueueDepth(t *testing.T, b *brokertest.Broker, vhost, queue string, n int) {
	t.Helper()
	for i := 0; b.QueueDepth(t, vhost, queue) != n; i++ {
		if i == 100 {
			t.Fatalf("%q holds %d messages, want %d", queue, b.QueueDepth(t, vhost, queue), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
