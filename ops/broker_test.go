package ops

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
)

func TestMain(m *testing.M) { brokertest.Main(m) }

// client is a management API client of the test broker, as the CLI makes one.
func client(t *testing.T, b *brokertest.Broker) *broker.Client {
	t.Helper()
	c, err := broker.NewClient(broker.Config{URL: b.MgmtURL, AMQPURL: b.AMQPURL, User: b.User, Password: b.Password})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func declare(t *testing.T, conn *amqp.Connection, name, typ string, args amqp.Table) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if args == nil {
		args = amqp.Table{}
	}
	args["x-queue-type"] = typ
	if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		t.Fatalf("declaring %q: %v", name, err)
	}
}

// publishAll publishes msgs to queue in order, confirmed.
func publishAll(t *testing.T, conn *amqp.Connection, queue string, msgs []amqp.Publishing) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	var dcs []*amqp.DeferredConfirmation
	for _, m := range msgs {
		m.DeliveryMode = amqp.Persistent
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", queue, true, false, m)
		if err != nil {
			t.Fatal(err)
		}
		dcs = append(dcs, dc)
	}
	for _, dc := range dcs {
		if !dc.Wait() {
			t.Fatal("publish nacked")
		}
	}
}

func msgs(prefix string, n int, headers func(i int) amqp.Table) []amqp.Publishing {
	out := make([]amqp.Publishing, n)
	for i := range out {
		out[i] = amqp.Publishing{MessageId: fmt.Sprintf("%s%03d", prefix, i), Body: []byte(fmt.Sprintf("body %d", i))}
		if headers != nil {
			out[i].Headers = headers(i)
		}
	}
	return out
}

// drainIDs consumes every message of queue and returns their ids in order.
func drainIDs(t *testing.T, b *brokertest.Broker, conn *amqp.Connection, vhost, queue string) []string {
	t.Helper()
	n := b.QueueDepth(t, vhost, queue)
	var ids []string
	for _, d := range brokertest.Drain(t, conn, queue, n, 30*time.Second) {
		ids = append(ids, d.MessageId)
	}
	return ids
}

func ids(prefix string, idx ...int) []string {
	var out []string
	for _, i := range idx {
		out = append(out, fmt.Sprintf("%s%03d", prefix, i))
	}
	return out
}

func seq(from, to int, keep func(int) bool) []int {
	var out []int
	for i := from; i < to; i++ {
		if keep == nil || keep(i) {
			out = append(out, i)
		}
	}
	return out
}

// TestPeekLeavesQueueInOrder peeks twice and then drains: a peek that
// moved the messages it read (a quorum queue requeues to its tail) would
// show in the second peek and in the drained order.
func TestPeekLeavesQueueInOrder(t *testing.T) {
	b := brokertest.Get(t)
	for _, typ := range []string{"classic", "quorum"} {
		t.Run(typ, func(t *testing.T) {
			vhost := b.NewVhost(t)
			conn := b.Dial(t, vhost)
			declare(t, conn, "orders.dlq", typ, nil)
			publishAll(t, conn, "orders.dlq", msgs("m", 30, func(i int) amqp.Table {
				return amqp.Table{contract.HeaderAttempt: "3", contract.HeaderLastError: fmt.Sprintf("error %d", i)}
			}))
			ctx := context.Background()
			for _, limit := range []int{5, 3} {
				got, res, err := Peek(ctx, conn, "orders.dlq", typ, limit, 0)
				if err != nil {
					t.Fatalf("Peek: %v", err)
				}
				var gotIDs []string
				for i, m := range got {
					gotIDs = append(gotIDs, m.MessageID)
					if m.Position != i+1 || m.LastError != fmt.Sprintf("error %d", i) || m.Reason != ReasonRetriesExhausted {
						t.Errorf("message %d decoded as %+v", i, m)
					}
				}
				if diff := cmp.Diff(ids("m", seq(0, limit, nil)...), gotIDs); diff != "" {
					t.Errorf("peek %d (-want +got):\n%s", limit, diff)
				}
				if res.Moved != 0 || res.Depth != 30 || len(res.Warnings) > 0 {
					t.Errorf("peek result %+v", res)
				}
			}
			if diff := cmp.Diff(ids("m", seq(0, 30, nil)...), drainIDs(t, b, conn, vhost, "orders.dlq")); diff != "" {
				t.Errorf("queue after peeks (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPassRelaysWindow moves every third message with a window of 8, far
// smaller than the queue, so consumers are relayed many times; moved and
// left messages must both keep their order.
func TestPassRelaysWindow(t *testing.T) {
	b := brokertest.Get(t)
	for _, typ := range []string{"classic", "quorum"} {
		t.Run(typ, func(t *testing.T) {
			vhost := b.NewVhost(t)
			conn := b.Dial(t, vhost)
			declare(t, conn, "src", typ, nil)
			declare(t, conn, "dst", "classic", nil)
			publishAll(t, conn, "src", msgs("m", 120, nil))
			var progress int
			res, err := Pass{
				Queue: "src", Target: "dst", Window: 8, InPlaceRequeue: InPlaceRequeue(typ),
				Decide: func(pos int, d *amqp.Delivery) Decision {
					if fmt.Sprintf("m%03d", pos-1) != d.MessageId {
						t.Errorf("position %d is message %s", pos, d.MessageId)
					}
					return Decision{Move: pos%3 == 0, Note: "kept"}
				},
				Progress: func(Result) { progress++ },
			}.Run(context.Background(), conn)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			want := Result{Queue: "src", Target: "dst", Depth: 120, Scanned: 120, Moved: 40, Left: 80, LeftBy: map[string]int{"kept": 80}}
			if diff := cmp.Diff(want, res); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if progress != 120 {
				t.Errorf("progress called %d times, want 120", progress)
			}
			if diff := cmp.Diff(ids("m", seq(0, 120, func(i int) bool { return (i+1)%3 == 0 })...), drainIDs(t, b, conn, vhost, "dst")); diff != "" {
				t.Errorf("moved (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(ids("m", seq(0, 120, func(i int) bool { return (i+1)%3 != 0 })...), drainIDs(t, b, conn, vhost, "src")); diff != "" {
				t.Errorf("left (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPassUnroutable moves to a queue that does not exist: every copy is
// returned, so nothing may leave the source.
func TestPassUnroutable(t *testing.T) {
	b := brokertest.Get(t)
	for _, typ := range []string{"classic", "quorum"} {
		t.Run(typ, func(t *testing.T) {
			vhost := b.NewVhost(t)
			conn := b.Dial(t, vhost)
			declare(t, conn, "src", typ, nil)
			publishAll(t, conn, "src", msgs("m", 10, nil))
			res, err := Pass{Queue: "src", Target: "nowhere", Window: 4, InPlaceRequeue: InPlaceRequeue(typ),
				Decide: func(int, *amqp.Delivery) Decision { return Decision{Move: true} }}.Run(context.Background(), conn)
			if err == nil || !strings.Contains(err.Error(), `queue "nowhere" returned`) {
				t.Errorf("Run error = %v, want the unroutable moves reported", err)
			}
			if res.Moved != 0 || res.Failed == 0 {
				t.Errorf("result %+v, want nothing moved and failures counted", res)
			}
			if diff := cmp.Diff(ids("m", seq(0, 10, nil)...), drainIDs(t, b, conn, vhost, "src")); diff != "" {
				t.Errorf("source after unroutable moves (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPassUnknownQueue(t *testing.T) {
	b := brokertest.Get(t)
	vhost := b.NewVhost(t)
	conn := b.Dial(t, vhost)
	_, err := Pass{Queue: "nope"}.Run(context.Background(), conn)
	if err == nil || err.Error() != `queue "nope" not found` {
		t.Errorf("Run error = %v, want queue \"nope\" not found", err)
	}
}

func TestReplay(t *testing.T) {
	b := brokertest.Get(t)
	vhost := b.NewVhost(t)
	conn := b.Dial(t, vhost)
	declare(t, conn, "orders", "quorum", nil)
	declare(t, conn, "orders.dlq", "quorum", nil)
	publishAll(t, conn, "orders.dlq", msgs("m", 12, func(i int) amqp.Table {
		tenant := "acme"
		if i%2 == 1 {
			tenant = "other"
		}
		return amqp.Table{
			"tenant": tenant, contract.HeaderAttempt: "4", contract.HeaderLastError: "boom",
			contract.HeaderFirstFailure: "2024-05-01T00:00:00Z", contract.HeaderOriginalRoutingKey: fmt.Sprintf("order.%d", i%3),
			"x-death": []any{amqp.Table{"queue": "orders", "reason": "rejected", "count": int64(1)}},
		}
	}))
	now := time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)
	ctx := context.Background()

	// Three of the acme messages: m000, m002, m004.
	res, err := Replay(ctx, conn, ReplayOptions{Queue: "orders.dlq", QueueType: "quorum", Limit: 3, Headers: map[string]string{"tenant": "acme"}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatalf("Replay: %v", err)
	}
	if res.Moved != 3 || res.Target != "orders" || res.Failed != 0 {
		t.Errorf("result %+v, want 3 moved to orders", res)
	}
	replayed := brokertest.Drain(t, conn, "orders", 3, 10*time.Second)
	var got []string
	for _, d := range replayed {
		got = append(got, d.MessageId)
		want := amqp.Table{"tenant": "acme", contract.HeaderOriginalRoutingKey: d.Headers[contract.HeaderOriginalRoutingKey],
			contract.HeaderLastError: "boom", contract.HeaderFirstFailure: "2024-05-01T00:00:00Z",
			contract.HeaderReplayCount: "1", contract.HeaderReplayedAt: "2024-06-01T00:00:00Z"}
		if diff := cmp.Diff(want, d.Headers); diff != "" {
			t.Errorf("headers of %s (-want +got):\n%s", d.MessageId, diff)
		}
		if d.DeliveryMode != amqp.Persistent || string(d.Body) == "" {
			t.Errorf("replayed %s: delivery mode %d, body %q", d.MessageId, d.DeliveryMode, d.Body)
		}
	}
	if diff := cmp.Diff(ids("m", 0, 2, 4), got); diff != "" {
		t.Errorf("replayed (-want +got):\n%s", diff)
	}

	// By original routing key: order.1 is m001, m004 (gone), m007, m010.
	res, err = Replay(ctx, conn, ReplayOptions{Queue: "orders.dlq", QueueType: "quorum", RoutingKey: "order.1"})
	if err != nil || res.Moved != 3 {
		t.Fatalf("Replay by routing key: %+v, %v; want 3 moved", res, err)
	}
	if diff := cmp.Diff(ids("m", 1, 7, 10), drainIDs(t, b, conn, vhost, "orders")); diff != "" {
		t.Errorf("replayed by routing key (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(ids("m", 3, 5, 6, 8, 9, 11), drainIDs(t, b, conn, vhost, "orders.dlq")); diff != "" {
		t.Errorf("left in the DLQ (-want +got):\n%s", diff)
	}

	if _, err := Replay(ctx, conn, ReplayOptions{Queue: "orders.dlq", To: "missing"}); err == nil ||
		!strings.Contains(err.Error(), `work queue "missing" not found`) {
		t.Errorf("Replay to a missing queue: %v", err)
	}
}

// TestSweep sweeps two DLQs out of three queues, with counts from real
// dead-lettering, from client-set x-death headers and malformed ones.
func TestSweep(t *testing.T) {
	b := brokertest.Get(t)
	vhost := b.NewVhost(t)
	conn := b.Dial(t, vhost)
	declare(t, conn, "dlq.a", "classic", nil)
	// A quorum DLQ as rmqtopo declares them (spec.DeadEndDeliveryLimit),
	// which CheckLeaveSafe lets a sweep read on every version.
	declare(t, conn, "dlq.b", "quorum", amqp.Table{"x-delivery-limit": int64(1_000_000)})
	declare(t, conn, "other", "classic", nil)
	// "work" dead-letters what is rejected into dlq.a: a real x-death.
	declare(t, conn, "work", "classic", amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq.a"})
	publishAll(t, conn, "work", msgs("r", 1, nil))
	ch, _ := conn.Channel()
	d, ok, err := ch.Get("work", false)
	if err != nil || !ok {
		t.Fatalf("get: %v %v", ok, err)
	}
	d.Nack(false, false)
	ch.Close()
	for b.QueueDepth(t, vhost, "dlq.a") == 0 {
		time.Sleep(10 * time.Millisecond)
	}

	deaths := func(counts ...any) amqp.Table {
		var list []any
		for _, c := range counts {
			list = append(list, amqp.Table{"queue": "q", "reason": "rejected", "count": c})
		}
		return amqp.Table{"x-death": list}
	}
	// index: 0:1 death, 1:3, 2:malformed, 3:2+2 (sum 4), 4:none, 5:string count
	headers := func(i int) amqp.Table {
		return []amqp.Table{deaths(int64(1)), deaths(int64(3)), {"x-death": "lots"}, deaths(int64(2), int32(2)), nil, deaths("9")}[i]
	}
	publishAll(t, conn, "dlq.a", msgs("a", 6, headers))
	publishAll(t, conn, "dlq.b", msgs("b", 6, headers))
	publishAll(t, conn, "other", msgs("o", 6, headers))

	ctx := context.Background()
	infos, err := client(t, b).ListQueues(ctx, vhost)
	if err != nil {
		t.Fatal(err)
	}
	var queues []Queue
	for _, q := range infos {
		queues = append(queues, queueOf(q))
	}
	sources, err := PlanSweep(queues, SweepOptions{Pattern: "dlq.*", MaxDeaths: 2, To: "dead.{name}"})
	if err != nil {
		t.Fatal(err)
	}
	version, err := client(t, b).Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range sources {
		names = append(names, s.Queue.Name+" -> "+s.Target)
		if err := CheckLeaveSafe(s.Queue, version); err != nil {
			t.Errorf("CheckLeaveSafe: %v", err)
		}
		res, err := SweepQueue(ctx, conn, s, SweepRun{MaxDeaths: 2, CreateTarget: true})
		if err != nil {
			t.Fatalf("SweepQueue %s: %v", s.Queue.Name, err)
		}
		if res.Moved != 2 || res.LeftBy[NoteUnreadable] != 2 || res.Failed != 0 {
			t.Errorf("sweep of %s: %+v, want 2 moved and 2 unreadable", s.Queue.Name, res)
		}
	}
	if diff := cmp.Diff([]string{"dlq.a -> dead.dlq.a", "dlq.b -> dead.dlq.b"}, names); diff != "" {
		t.Errorf("sources (-want +got):\n%s", diff)
	}
	for _, q := range []string{"a", "b"} {
		if diff := cmp.Diff(ids(q, 1, 3), drainIDs(t, b, conn, vhost, "dead.dlq."+q)); diff != "" {
			t.Errorf("moved from dlq.%s (-want +got):\n%s", q, diff)
		}
		want := ids(q, 0, 2, 4, 5)
		if q == "a" {
			want = append(ids("r", 0), want...) // the really dead-lettered one, 1 death
		}
		if diff := cmp.Diff(want, drainIDs(t, b, conn, vhost, "dlq."+q)); diff != "" {
			t.Errorf("left in dlq.%s (-want +got):\n%s", q, diff)
		}
	}
	if got := b.QueueDepth(t, vhost, "other"); got != 6 {
		t.Errorf("queue other has %d messages, want its 6", got)
	}
}

// TestPassNackedMoves moves into a full queue that rejects publishes: the
// broker nacks those copies, so their sources must stay, in order.
func TestPassNackedMoves(t *testing.T) {
	b := brokertest.Get(t)
	for _, typ := range []string{"classic", "quorum"} {
		t.Run(typ, func(t *testing.T) {
			vhost := b.NewVhost(t)
			conn := b.Dial(t, vhost)
			declare(t, conn, "src", typ, nil)
			declare(t, conn, "full", "classic", amqp.Table{"x-max-length": int64(4), "x-overflow": "reject-publish"})
			publishAll(t, conn, "src", msgs("m", 10, nil))
			res, err := Pass{Queue: "src", Target: "full", Window: 8, InPlaceRequeue: InPlaceRequeue(typ),
				Decide: func(int, *amqp.Delivery) Decision { return Decision{Move: true} }}.Run(context.Background(), conn)
			if err == nil || !strings.Contains(err.Error(), `the broker did not confirm`) {
				t.Errorf("Run error = %v, want the nacked moves reported", err)
			}
			if res.Moved != 4 || res.Moved+res.Failed != res.Scanned {
				t.Errorf("result %+v, want 4 moved and the rest failed", res)
			}
			if diff := cmp.Diff(ids("m", 0, 1, 2, 3), drainIDs(t, b, conn, vhost, "full")); diff != "" {
				t.Errorf("moved (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(ids("m", seq(4, 10, nil)...), drainIDs(t, b, conn, vhost, "src")); diff != "" {
				t.Errorf("left (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPassInterrupted cancels a pass's context halfway: it stops moving,
// settles what is in flight and leaves the rest in order.
func TestPassInterrupted(t *testing.T) {
	b := brokertest.Get(t)
	for _, typ := range []string{"classic", "quorum"} {
		t.Run(typ, func(t *testing.T) {
			vhost := b.NewVhost(t)
			conn := b.Dial(t, vhost)
			declare(t, conn, "src", typ, nil)
			declare(t, conn, "dst", "classic", nil)
			publishAll(t, conn, "src", msgs("m", 300, nil))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			res, err := Pass{Queue: "src", Target: "dst", Window: 16, InPlaceRequeue: InPlaceRequeue(typ),
				Decide: func(int, *amqp.Delivery) Decision { return Decision{Move: true} },
				Progress: func(r Result) {
					if r.Scanned == 100 {
						cancel()
					}
				}}.Run(ctx, conn)
			if err == nil || !strings.Contains(err.Error(), "interrupted") {
				t.Errorf("Run error = %v, want interrupted", err)
			}
			if res.Failed != 0 || res.Moved < 100 || res.Moved > 120 {
				t.Errorf("result %+v, want about 100 moved and none failed", res)
			}
			moved := drainIDs(t, b, conn, vhost, "dst")
			left := drainIDs(t, b, conn, vhost, "src")
			if diff := cmp.Diff(ids("m", seq(0, 300, nil)...), append(moved, left...)); diff != "" {
				t.Errorf("moved then left (-want +got):\n%s", diff)
			}
		})
	}
}
