package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/exitcode"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
)

// heldSpec is issue 46's reproduction: a native queue whose schedule
// changes from delays to delays.
const heldSpec = `name: held
queues:
  - name: nh.work
    type: quorum
    layout: native
    retry: {delays: [%s]}
`

// TestPlainApplyKeepsHeldRetries is issue 46's loss: five retries the
// broker holds inside a native queue (rejected with requeue, delayed:
// neither ready nor delivered, no consumer), then a schedule change that
// replaces the queue. The apply runs right after the rejects, when the
// management statistics do not show them yet. A plain apply must refuse,
// naming the five, and every id must come back to the queue after its
// delay.
func TestPlainApplyKeepsHeldRetries(t *testing.T) {
	t.Parallel()
	// dlq off replaces a native queue of any shape (its dead-lettering
	// argument); a schedule change does so only in the arguments shape
	// (TestOnlineNativeScheduleInPlace and ...InBinding for the others).
	conn, ids, stdout, stderr, code := applyOverHeldRetries(t, "3s, 3s", "    dlq: false\n")
	if code != exitcode.Refused {
		t.Fatalf("apply of a replace over 5 held retries: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitcode.Refused, stdout, stderr)
	}
	if !strings.Contains(stdout, "5 messages at stake") {
		t.Errorf("the refused plan does not name the 5 held retries:\n%s", stdout)
	}
	if got := drainIDs(t, conn, "nh.work", len(ids), 3*time.Second); !slices.Equal(got, ids) {
		t.Errorf("after the refused apply, nh.work gave back %v, want %v", got, ids)
	}
}

// applyOverHeldRetries applies heldSpec with delays, holds 5 retries in
// its native queue, and applies it again with change added to the queue;
// it returns the connection, the held ids and the second apply's output.
func applyOverHeldRetries(t *testing.T, delays, change string) (conn *amqp.Connection, ids []string, stdout, stderr string, code int) {
	t.Helper()
	o := newOnline(t)
	needsNative(t, o)
	o.must(t, 0, "apply", "--auto-approve", o.spec(t, "before.yaml", fmt.Sprintf(heldSpec, delays)))
	after := o.spec(t, "after.yaml", fmt.Sprintf(heldSpec, delays)+change)
	conn = o.b.Dial(t, o.vhost)
	ids = publishIDs(t, conn, "nh.work", 5)
	rejectAll(t, conn, "nh.work", len(ids))
	stdout, stderr, code = rmqtopo(t, "", append([]string{"apply", "--auto-approve", after}, o.conn()...)...)
	return conn, ids, stdout, stderr, code
}

// TestMigrationWaitsForHeldRetries: the same replace with migrate: true
// moves the queue, and its delete waits for the five retries the broker
// holds, saying so (issue 46, point 3: it said "recording ownership" for
// the whole wait), until they come due and move; every id is back in the
// queue afterwards, and the plan counted the five.
func TestMigrationWaitsForHeldRetries(t *testing.T) {
	t.Parallel()
	// Held long enough to outlast the plans, which wait for fresh counts
	// (two quorum ticks, 5 to 10 s, each).
	conn, ids, stdout, stderr, code := applyOverHeldRetries(t, "30s, 30s", "    dlq: false\n    migrate: true\n")
	if code != 0 {
		t.Fatalf("apply: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "moves 5 messages") {
		t.Errorf("the plan does not count the 5 held retries it moves:\n%s", stdout)
	}
	if want := `migrate queue "nh.work": waiting for 5 retries the broker holds, the last due in`; !strings.Contains(stderr, want) {
		t.Errorf("the migration's wait does not say what it waits for (%q):\n%s", want, stderr)
	}
	if got := drainIDs(t, conn, "nh.work", len(ids), 30*time.Second); !slices.Equal(got, ids) {
		t.Errorf("after the migration, nh.work gave back %v, want %v", got, ids)
	}
}

// publishIDs publishes n persistent messages with ids "0".."n-1" to queue
// through the default exchange, confirmed, and returns the ids.
func publishIDs(t *testing.T, conn *amqp.Connection, queue string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprint(i)
		brokertest.PublishConfirmed(t, conn, "", queue, amqp.Publishing{DeliveryMode: amqp.Persistent, MessageId: ids[i], Body: []byte(ids[i])})
	}
	return ids
}

// rejectAll takes n deliveries of queue and rejects each with requeue, as
// retry.Consume fails an attempt on a native queue, then cancels: a native
// queue holds each for its delay.
func rejectAll(t *testing.T, conn *amqp.Connection, queue string, n int) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Qos(n, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume(queue, "reject", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	guard := time.After(waitguard.For(5 * time.Second))
	for range n {
		select {
		case d := <-ds:
			if err := d.Reject(true); err != nil {
				t.Fatal(err)
			}
		case <-guard:
			t.Fatalf("%s delivered fewer than %d messages", queue, n)
		}
	}
	if err := ch.Cancel("reject", false); err != nil {
		t.Fatal(err)
	}
}

// drainIDs takes want messages from queue, acking each, waiting up to
// delay plus a guard for retries still held, and returns their ids
// sorted; then it checks that nothing more comes within a moment.
func drainIDs(t *testing.T, conn *amqp.Connection, queue string, want int, delay time.Duration) []string {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	var ids []string
	deadline := time.Now().Add(delay + waitguard.For(5*time.Second))
	for len(ids) < want && time.Now().Before(deadline) {
		d, ok, err := ch.Get(queue, false)
		if err != nil {
			t.Fatalf("get from %s: %v", queue, err)
		}
		if !ok {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		ids = append(ids, d.MessageId)
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(ids)
	return ids
}
