package broker_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/topology"
)

// guardBinding is a binding to the guarded queue as the management API
// reports it, properties key included: a restored binding must be the same
// binding, not merely an equivalent one.
type guardBinding struct {
	Source        string         `json:"source"`
	RoutingKey    string         `json:"routing_key"`
	Arguments     map[string]any `json:"arguments"`
	PropertiesKey string         `json:"properties_key"`
}

// guardSetup declares, in a vhost of its own, a quorum queue "work" bound
// from a direct exchange (two keys) and from a headers exchange with
// arguments, and returns the session's view of the queue.
func guardSetup(t *testing.T) (*live, *amqp.Connection, topology.Queue) {
	t.Helper()
	l := newLive(t)
	conn := l.b.Dial(t, l.vhost)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if _, err := ch.QueueDeclare("work", true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	for _, x := range [][2]string{{"biz", "direct"}, {"hdr", "headers"}} {
		if err := ch.ExchangeDeclare(x[0], x[1], true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, key := range []string{"a", "b"} {
		if err := ch.QueueBind("work", key, "biz", false, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.QueueBind("work", "", "hdr", false, amqp.Table{"x-match": "all", "kind": "order", "n": int64(7)}); err != nil {
		t.Fatal(err)
	}
	return l, conn, topology.Queue{Vhost: l.vhost, Name: "work", Durable: true,
		Arguments: topology.Args{"x-queue-type": "quorum"}}
}

// bindings lists the bindings to queue, the default exchange's included.
func (l *live) bindings(t *testing.T, queue string) []guardBinding {
	t.Helper()
	var out []guardBinding
	if err := l.c.GetJSON(context.Background(), "/api/queues/"+url.PathEscape(l.vhost)+"/"+url.PathEscape(queue)+"/bindings", nil, &out); err != nil {
		t.Fatal(err)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Source != out[j].Source {
			return out[i].Source < out[j].Source
		}
		return out[i].PropertiesKey < out[j].PropertiesKey
	})
	return out
}

func (l *live) queueExists(t *testing.T, queue string) bool {
	t.Helper()
	counts, err := l.s.PassiveCounts(context.Background(), l.vhost, []string{queue})
	if err != nil {
		t.Fatal(err)
	}
	_, ok := counts[queue]
	return ok
}

// TestQuorumDeleteGuard: the guarded delete of a quorum queue cuts it off
// from its exchanges, refuses if it holds ready messages or has a consumer
// (which may hold unacknowledged deliveries that the count leaves out),
// and then restores its bindings exactly; an empty, unconsumed queue is
// deleted.
func TestQuorumDeleteGuard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("consumer holding an unacked message", func(t *testing.T) {
		t.Parallel()
		l, conn, q := guardSetup(t)
		publish(t, conn, "biz", "a", nil, 1)
		cons, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		if err := cons.Qos(1, 0, false); err != nil {
			t.Fatal(err)
		}
		deliveries, err := cons.Consume("work", "holder", false, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-deliveries:
		// A hang guard: the ready message reaches the new consumer in
		// milliseconds.
		case <-time.After(waitguard.For(100 * time.Millisecond)):
			t.Fatal("no delivery")
		}
		// Not acknowledged: the queue has no ready message, which is all a
		// count can see.
		if n := l.b.QueueDepth(t, l.vhost, "work"); n != 0 {
			t.Fatalf("work holds %d ready messages with the delivery unacked, want 0", n)
		}
		before := l.bindings(t, "work")

		err = l.s.DeleteQueue(ctx, q, true)
		if !errors.Is(err, broker.ErrNotEmpty) || !strings.Contains(err.Error(), "has 1 consumer") ||
			!strings.Contains(err.Error(), "--allow-destroy") {
			t.Fatalf("err = %v, want the consumers refusal", err)
		}
		if !l.queueExists(t, "work") {
			t.Fatal("work was deleted with an unacknowledged delivery")
		}
		if diff := cmp.Diff(before, l.bindings(t, "work")); diff != "" {
			t.Errorf("bindings after the refusal (-before +after):\n%s", diff)
		}
		// The delivery goes back to the queue when its channel closes.
		cons.Close()
		// Under a second (the quorum queue returns it asynchronously).
		waitFor(t, waitguard.For(time.Second), "the unacked delivery back in work", func() bool {
			return l.b.QueueDepth(t, l.vhost, "work") == 1
		})
	})

	t.Run("empty", func(t *testing.T) {
		t.Parallel()
		l, _, q := guardSetup(t)
		if got := len(l.bindings(t, "work")); got != 4 {
			t.Fatalf("work has %d bindings, want 4 (default exchange, 2 from biz, 1 from hdr)", got)
		}
		if err := l.s.DeleteQueue(ctx, q, true); err != nil {
			t.Fatal(err)
		}
		if l.queueExists(t, "work") {
			t.Fatal("the empty queue work was kept")
		}
		// A queue already gone is success.
		if err := l.s.DeleteQueue(ctx, q, true); err != nil {
			t.Fatalf("deleting a missing queue: %v", err)
		}
	})

	t.Run("ready message", func(t *testing.T) {
		t.Parallel()
		l, conn, q := guardSetup(t)
		publish(t, conn, "biz", "b", nil, 1)
		before := l.bindings(t, "work")

		err := l.s.DeleteQueue(ctx, q, true)
		if !errors.Is(err, broker.ErrNotEmpty) || !strings.Contains(err.Error(), "holds 1 message") {
			t.Fatalf("err = %v, want the not-empty refusal", err)
		}
		if n := l.b.QueueDepth(t, l.vhost, "work"); n != 1 {
			t.Fatalf("work holds %d messages, want 1", n)
		}
		if diff := cmp.Diff(before, l.bindings(t, "work")); diff != "" {
			t.Errorf("bindings after the refusal (-before +after):\n%s", diff)
		}
		// The restored bindings route: by key, and by headers matching the
		// restored arguments.
		publish(t, conn, "biz", "a", nil, 1)
		publish(t, conn, "hdr", "", amqp.Table{"kind": "order", "n": int64(7)}, 1)
		if n := l.b.QueueDepth(t, l.vhost, "work"); n != 3 {
			t.Fatalf("work holds %d messages after publishing through the restored bindings, want 3", n)
		}
	})
}

// TestQuorumCountedEmpty: RabbitMQ 3.10 counts a quorum queue whose leader
// does not answer within 250 ms as empty (0 messages, 0 consumers), and
// the delete guard and a migration's delete would have trusted that.
// With the leader suspended, the passive declare says 0 while the queue
// holds 3; once it answers again, confirmEmpty finds a message, gives it
// back, and says not empty; after the queue is emptied it says empty.
func TestQuorumCountedEmpty(t *testing.T) {
	l, conn, q := guardSetup(t)
	if l.b.Node == nil {
		t.Skip("suspends a queue's leader with rabbitmqctl eval: needs the private node")
	}
	publish(t, conn, "", "work", nil, 3)
	// sys:suspend or sys:resume the Ra server that leads the queue.
	ctl := func(call string) {
		t.Helper()
		expr := fmt.Sprintf(`{ok, Q} = rabbit_amqqueue:lookup(rabbit_misc:r(<<"%s">>, queue, <<"work">>)), {Name, _} = amqqueue:get_pid(Q), sys:%s(whereis(Name)).`, l.vhost, call)
		if out, err := l.b.Node.Ctl(context.Background(), "eval", expr); err != nil {
			t.Fatalf("rabbitmqctl eval: %v: %s", err, out)
		}
	}
	ctl("suspend")
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			ctl("resume")
		}
	}
	defer resume()
	if n := l.b.QueueDepth(t, l.vhost, "work"); n != 0 {
		t.Fatalf("with its leader suspended the queue counts %d messages; the test needs the broker's false 0", n)
	}
	resume()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := broker.ConfirmEmpty(ch, q); !errors.Is(err, broker.ErrNotEmpty) {
		t.Fatalf("confirmEmpty of a queue of 3 = %v, want ErrNotEmpty", err)
	}
	// The probe's nack returns the message asynchronously: a guard around
	// the requeue (milliseconds), which a lost message would never pass.
	waitFor(t, waitguard.For(100*time.Millisecond), "the probed message back in the queue", func() bool {
		return l.b.QueueDepth(t, l.vhost, "work") == 3
	})
	if _, err := ch.QueuePurge("work", false); err != nil {
		t.Fatal(err)
	}
	if err := broker.ConfirmEmpty(ch, q); err != nil {
		t.Fatalf("confirmEmpty of an empty queue = %v, want nil", err)
	}
}
