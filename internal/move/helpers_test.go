package move_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/move"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
)

// The tests are in package move_test: brokertest imports internal/broker,
// which imports move.

func TestMain(m *testing.M) { brokertest.Main(m) }

// queueTypes are the source queue types every scenario runs on: a classic
// queue requeues in place, a quorum queue to its tail.
var queueTypes = []string{"classic", "quorum"}

// other is the type of the target when the source is typ, so that moves
// both into and out of each type are covered.
func other(typ string) string {
	if typ == "classic" {
		return "quorum"
	}
	return "classic"
}

// wait bounds a test's pass, or its wait for a queue's counts, only so
// that a hung broker fails the test instead of hanging it; it is no timing
// goal. The slowest pass here (TestUntilEmptySlowLink's, 200 ms per
// round trip) takes about 5 s on a quiet machine, and the guard must
// outlast a pass's own SettleTimeout (30 s) so that the pass's error shows;
// 12 s keeps it at the 2 minutes it was.
func wait() time.Duration { return waitguard.For(12 * time.Second) }

// env is one test's vhost on the harness broker.
type env struct {
	t     *testing.T
	b     *brokertest.Broker
	vhost string
	conn  *amqp.Connection
}

func newEnv(t *testing.T) *env {
	t.Helper()
	b := brokertest.Get(t)
	vhost := b.NewVhost(t)
	return &env{t: t, b: b, vhost: vhost, conn: b.Dial(t, vhost)}
}

// declare declares a durable queue of type typ with extra arguments.
func (e *env) declare(name, typ string, args amqp.Table) {
	e.t.Helper()
	ch, err := e.conn.Channel()
	if err != nil {
		e.t.Fatal(err)
	}
	defer ch.Close()
	a := amqp.Table{"x-queue-type": typ}
	for k, v := range args {
		a[k] = v
	}
	if _, err := ch.QueueDeclare(name, true, false, false, false, a); err != nil {
		e.t.Fatalf("declaring %q: %v", name, err)
	}
}

// publish publishes n persistent messages m000, m001... to queue in order
// and waits for their confirms.
func (e *env) publish(queue string, n int) {
	e.t.Helper()
	ch, err := e.conn.Channel()
	if err != nil {
		e.t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		e.t.Fatal(err)
	}
	var dcs []*amqp.DeferredConfirmation
	for i := range n {
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", queue, true, false, amqp.Publishing{
			MessageId: id(i), DeliveryMode: amqp.Persistent, Body: []byte("body " + id(i)),
		})
		if err != nil {
			e.t.Fatal(err)
		}
		dcs = append(dcs, dc)
	}
	for _, dc := range dcs {
		if !dc.Wait() {
			e.t.Fatal("publish nacked")
		}
	}
}

// run runs p over the env's connection.
func (e *env) run(p move.Pass) (move.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait())
	defer cancel()
	return p.Run(ctx, e.conn)
}

// stat reads queue's ready and consumer counts with a passive declare;
// ok is false if the queue does not exist.
func (e *env) stat(queue string) (ready, consumers int, ok bool) {
	e.t.Helper()
	ch, err := e.conn.Channel()
	if err != nil {
		e.t.Fatal(err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
	var ae *amqp.Error
	if errors.As(err, &ae) && ae.Code == amqp.NotFound {
		return 0, 0, false
	}
	if err != nil {
		e.t.Fatalf("passive declare of %q: %v", queue, err)
	}
	return q.Messages, q.Consumers, true
}

// waitFor polls until cond holds; past the deadline it fails the test.
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(wait())
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// read takes every message of queue with basic.get, acking each, and
// returns their ids in order. It first waits until the queue has no
// consumer: a pass's channel is closed and the broker took back what it
// held (a quorum queue does that asynchronously). A queue that does not
// exist reads as empty.
func (e *env) read(queue string) []string {
	e.t.Helper()
	e.waitFor("queue "+queue+" to lose its consumers", func() bool {
		_, consumers, _ := e.stat(queue)
		return consumers == 0
	})
	if _, _, ok := e.stat(queue); !ok {
		return nil
	}
	ch, err := e.conn.Channel()
	if err != nil {
		e.t.Fatal(err)
	}
	defer ch.Close()
	var got []string
	for {
		d, ok, err := ch.Get(queue, false)
		if err != nil {
			e.t.Fatalf("basic.get from %q: %v", queue, err)
		}
		if !ok {
			return got
		}
		if err := d.Ack(false); err != nil {
			e.t.Fatal(err)
		}
		got = append(got, d.MessageId)
	}
}

func id(i int) string { return fmt.Sprintf("m%03d", i) }

// ids returns the ids of messages from up to (not including) to that keep
// selects (nil keeps all), in order.
func ids(from, to int, keep func(i int) bool) []string {
	var out []string
	for i := from; i < to; i++ {
		if keep == nil || keep(i) {
			out = append(out, id(i))
		}
	}
	return out
}

// same checks that got is want, in order.
func same(t *testing.T, what string, want, got []string) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", what, diff)
	}
}

// nothingLost checks that each of messages m000 to m<n-1> is in at least one
// of the queues' contents (duplicates allowed), and that they hold no
// other message.
func nothingLost(t *testing.T, n int, contents ...[]string) {
	t.Helper()
	seen := map[string]int{}
	for _, c := range contents {
		for _, m := range c {
			seen[m]++
		}
	}
	var lost, dups []string
	for _, m := range ids(0, n, nil) {
		if seen[m] == 0 {
			lost = append(lost, m)
		}
		if seen[m] > 1 {
			dups = append(dups, m)
		}
		delete(seen, m)
	}
	if len(lost) > 0 {
		t.Errorf("%d of %d messages lost: %v", len(lost), n, lost)
	}
	if len(seen) > 0 {
		t.Errorf("unknown messages: %v", seen)
	}
	if len(dups) > 0 {
		t.Logf("%d messages are in both queues (allowed): %v", len(dups), dups)
	}
}

// contains checks that got holds every message of want (in any order, more
// allowed).
func contains(t *testing.T, what string, got, want []string) {
	t.Helper()
	var missing []string
	for _, m := range want {
		if !slices.Contains(got, m) {
			missing = append(missing, m)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%s misses %v (has %v)", what, missing, got)
	}
}

// mode is how a scenario's pass runs: a scan (ops.Pass's) or a move until
// empty (a migration's).
type mode struct {
	name       string
	untilEmpty bool
}

var modes = []mode{{"scan", false}, {"until-empty", true}}

// each runs f as a subtest for each source queue type and mode.
func each(t *testing.T, f func(t *testing.T, typ string, m mode)) {
	for _, typ := range queueTypes {
		for _, m := range modes {
			t.Run(typ+"/"+m.name, func(t *testing.T) { f(t, typ, m) })
		}
	}
}
