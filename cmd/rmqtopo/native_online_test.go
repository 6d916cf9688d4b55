package main

import (
	"net/url"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/rabbitmq"
	"github.com/rmqtopo/rmqtopo/spec"
)

// needsNative skips a test on a broker older than the native layout's
// first release.
func needsNative(t *testing.T, o *online) {
	t.Helper()
	if p, _ := rabbitmq.ProfileOf(o.b.Version(t)); !p.NativeDelayedRetry() {
		t.Skipf("the native layout needs RabbitMQ %s; the test broker is %s", rabbitmq.First(rabbitmq.Profile.NativeDelayedRetry), o.b.Version(t))
	}
}

// nativeFrom is a work queue "orders" in each layout a live queue can
// move to native from, with one 8s retry, which outlasts the migration: a retry that expires in the instant
// the migrated queue does not exist is held by the wait queue until the
// broker's dead_letter_worker_publisher_confirm_timeout (minutes).
var nativeFrom = map[string]string{
	"shared":       "layout: shared\n    return_queue: false",
	"per-attempt":  "layout: per-attempt\n    return_queue: false",
	"levels":       "layout: levels\n    return_queue: false",
	"return-queue": "layout: shared\n    return_queue: true",
}

const nativeSpec = `name: orders
queues:
  - name: orders
    type: quorum
    %s
    retry: {delays: [8s]}
`

// TestOnlineMoveToNativeAndBack moves a live queue with messages to the
// native layout (layout: native, migrate: true) from each layout, while a
// retry waits in its wait path: the queue's messages are migrated, the
// waiting retry comes back into it after its delay and none is lost; the
// retired wait queues then go, and the plan converges. Then it moves the
// queue back (a broker downgrade's first step) with a retry deferred
// inside the queue itself: every message is still there after.
func TestOnlineMoveToNativeAndBack(t *testing.T) {
	t.Parallel()
	needsNative(t, newOnline(t))
	for from, layout := range nativeFrom {
		t.Run(from, func(t *testing.T) {
			t.Parallel()
			o := newOnline(t)
			before := o.spec(t, "before.yaml", strings.Replace(nativeSpec, "%s", layout, 1))
			native := o.spec(t, "native.yaml", strings.Replace(nativeSpec, "%s", "layout: native\n    migrate: true", 1))
			back := o.spec(t, "back.yaml", strings.Replace(nativeSpec, "%s", "layout: shared\n    return_queue: false\n    migrate: true", 1))
			o.must(t, 0, "apply", "--auto-approve", before)
			conn := o.b.Dial(t, o.vhost)
			const n = 5
			for range n {
				brokertest.PublishConfirmed(t, conn, "", "orders", amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte("ready")})
			}
			publishRetry(t, conn, from)

			out := o.must(t, 0, "apply", "--auto-approve", native)
			if !strings.Contains(out, `>/+ queue "orders"`) {
				t.Fatalf("the move to native is not a migration:\n%s", out)
			}
			waitDepth(t, o, "orders", n+1, 8*time.Second)
			// Later applies delete the wait queues the retry left once
			// empty (a ladder's as the message left each level); the return
			// queue, not a wait queue, is left behind.
			applyUntilConverged(t, o, native)

			deferOne(t, conn)
			out = o.must(t, 0, "apply", "--auto-approve", back)
			if !strings.Contains(out, `>/+ queue "orders"`) {
				t.Fatalf("the move back is not a migration:\n%s", out)
			}
			waitDepth(t, o, "orders", n+1, 8*time.Second)
			applyUntilConverged(t, o, back)
		})
	}
}

// applyUntilConverged applies path until its plan has no changes, at most three
// times.
func applyUntilConverged(t *testing.T, o *online, path string) {
	t.Helper()
	for range 3 {
		o.must(t, 0, "apply", "--auto-approve", path)
		if _, _, code := rmqtopo(t, "", append([]string{"plan", "--detailed-exitcode", path}, o.conn()...)...); code == 0 {
			return
		}
	}
	t.Errorf("after three applies, the plan still has changes:\n%s", o.must(t, 2, "plan", "--detailed-exitcode", path))
}

// publishRetry puts one retry of "orders" (attempt 2) into the wait path
// of layout from, as the runtime helper publishes it, for 8 s.
func publishRetry(t *testing.T, conn *amqp.Connection, from string) {
	t.Helper()
	publishRetryOf(t, conn, "orders", from, 8*time.Second, amqp.Publishing{Body: []byte("waiting")})
}

// publishRetryOf puts msg into the wait path of queue's layout from as its
// retry for attempt 2, due after delay (a ladder's; the wait queues' own
// TTL sets it elsewhere), as the runtime helper publishes it.
func publishRetryOf(t *testing.T, conn *amqp.Connection, queue, from string, delay time.Duration, msg amqp.Publishing) {
	t.Helper()
	key := queue
	switch from {
	case "return-queue":
		key = contract.ReturnQueue(queue)
	case "levels":
		l, err := contract.NewLadder(spec.DefaultLevelsResolution, spec.DefaultLevelsMax)
		if err != nil {
			t.Fatal(err)
		}
		if key, err = l.RoutingKey(delay, queue); err != nil {
			t.Fatal(err)
		}
	}
	msg.DeliveryMode = amqp.Persistent
	msg.Headers = amqp.Table{contract.HeaderAttempt: contract.AttemptValue(2)}
	brokertest.PublishConfirmed(t, conn, contract.RetryExchange(queue), key, msg)
}

// deferOne takes one message of the native queue "orders" and rejects it
// with requeue: the broker holds it inside the queue for its delay.
func deferOne(t *testing.T, conn *amqp.Connection) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	d, ok, err := ch.Get("orders", false)
	if err != nil || !ok {
		t.Fatalf("get from orders: %v, %v", ok, err)
	}
	if err := d.Reject(true); err != nil {
		t.Fatal(err)
	}
}

// waitDepth waits until queue holds want ready messages, past the delay
// of a retry still on its way; more than want is a duplicate, fewer at
// the end a loss.
func waitDepth(t *testing.T, o *online, queue string, want int, delay time.Duration) {
	t.Helper()
	deadline := time.Now().Add(delay + waitguard.For(5*time.Second))
	got := -1
	for time.Now().Before(deadline) {
		if got = o.b.QueueDepth(t, o.vhost, queue); got >= want {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got != want {
		t.Fatalf("%s holds %d ready messages, want %d; the vhost's queues: %s", queue, got, want,
			o.api(t, "GET", "/api/queues/"+url.PathEscape(o.vhost)+"?columns=name,messages,messages_ready", ""))
	}
}
