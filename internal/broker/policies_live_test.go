package broker_test

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rabbithole "github.com/michaelklishin/rabbit-hole/v2"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/apply"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/shapetest"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

// declares replays a library's start-up declares on a fresh channel, as
// the library's own code makes them, argument for argument; a 406 closes
// the channel and fails the test, as it would stop the service.
type declares struct {
	t  *testing.T
	ch *amqp.Channel
}

func newDeclares(t *testing.T, conn *amqp.Connection) *declares {
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ch.Close() })
	return &declares{t: t, ch: ch}
}

func (d *declares) exchange(name, kind string) {
	d.t.Helper()
	if err := d.ch.ExchangeDeclare(name, kind, true, false, false, false, nil); err != nil {
		d.t.Fatalf("the library's declare of exchange %q: %v", name, err)
	}
}

func (d *declares) queue(name string, args amqp.Table) {
	d.t.Helper()
	if _, err := d.ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		d.t.Fatalf("the library's declare of queue %q: %v", name, err)
	}
}

func (d *declares) bind(queue, key, exchange string, args amqp.Table) {
	d.t.Helper()
	if err := d.ch.QueueBind(queue, key, exchange, false, args); err != nil {
		d.t.Fatalf("the library's binding of %q to %q: %v", queue, exchange, err)
	}
}

// settle waits until the one message sent at sent arrives in queue, and
// returns how long it took. within, counted from sent, is a hang guard,
// never a timing goal: callers size it with waitguard.For.
func settle(t *testing.T, conn *amqp.Connection, queue string, sent time.Time, within time.Duration) time.Duration {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	for time.Since(sent) < within {
		if q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil); err == nil && q.Messages > 0 {
			return time.Since(sent)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no message arrived in %q within %v", queue, within)
	return 0
}

// rejectOne takes one message from queue and rejects it without requeue,
// as the libraries give up on a message.
func rejectOne(t *testing.T, conn *amqp.Connection, queue string) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	d, ok, err := ch.Get(queue, false)
	if err != nil || !ok {
		t.Fatalf("get from %q: %v, %v", queue, ok, err)
	}
	if err := d.Nack(false, false); err != nil {
		t.Fatal(err)
	}
}

func send(t *testing.T, conn *amqp.Connection, exchange, key string, msg amqp.Publishing) time.Time {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), exchange, key, false, false, msg)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := dc.WaitContext(context.Background()); !ok || err != nil {
		t.Fatalf("publish to %q/%q not confirmed: %v", exchange, key, err)
	}
	return sent
}

// libraryRun is one preset's library, replayed: after the apply, its
// declares; then a retry as it publishes one, due after delay, returning
// to the work queue; then a message it gives up on, kept in the DLQ.
type libraryRun struct {
	spec    string
	declare func(d *declares)
	retry   func(t *testing.T, conn *amqp.Connection) (sent time.Time)
	delay   time.Duration
	// expiration is the per-message expiration the library sets, if any:
	// the retry must come back on the queue's TTL, well before it.
	expiration time.Duration
}

func TestPresetLibrariesRunUnchanged(t *testing.T) {
	runs := map[string]libraryRun{
		"goqueue": {
			spec: "version: 1\nqueues:\n  - {name: ev, preset: goqueue, retry: {linear: {step: 1s, attempts: 2}}}\n",
			declare: func(d *declares) {
				d.queue("ev", nil) // initQueue: the user's QueueDeclareConfig, no arguments by default
				d.exchange("ev__retry_exchange", "topic")
				d.exchange("ev__retry_dlx", "fanout")
				d.bind("ev", "", "ev__retry_dlx", nil)
				for i := 1; i <= 2; i++ {
					n := "ev__retry." + strconv.Itoa(i)
					d.queue(n, amqp.Table{"x-dead-letter-exchange": "ev__retry_dlx"})
					d.bind(n, n, "ev__retry_exchange", nil)
				}
			},
			retry: func(t *testing.T, conn *amqp.Connection) time.Time {
				// requeueMessageWithDLQ: delay 1s × millisecondsMultiplier 10,000.
				return send(t, conn, "ev__retry_exchange", "ev__retry.1", amqp.Publishing{Body: []byte("r"),
					Headers: amqp.Table{"goqueue-retry-count": int64(1)}, Expiration: strconv.Itoa(1 * 10_000)})
			},
			delay:      time.Second,
			expiration: 10 * time.Second,
		},
		"outbox": {
			spec: "version: 1\nqueues:\n  - {name: ob, type: quorum, preset: outbox, retry: {delays: [1s]}}\n",
			declare: func(d *declares) {
				d.queue("ob.delay_1s", amqp.Table{"x-message-ttl": int32(1000), "x-dead-letter-exchange": "",
					"x-dead-letter-routing-key": "ob", "x-queue-type": "quorum"})
			},
			retry: func(t *testing.T, conn *amqp.Connection) time.Time {
				return send(t, conn, "", "ob.delay_1s", amqp.Publishing{Body: []byte("r")})
			},
			delay: time.Second,
		},
		"spring": {
			spec: "version: 1\nqueues:\n  - {name: sq, preset: spring, retry: {delays: [1s]}}\n",
			declare: func(d *declares) {
				d.exchange("wait", "headers")
				d.exchange("return", "headers")
				d.queue("wait-queue-1000", amqp.Table{"x-message-ttl": int64(1000), "x-dead-letter-exchange": "return"})
				d.bind("wait-queue-1000", "", "wait", amqp.Table{"wait-for": "1000"})
				d.queue("sq", amqp.Table{"x-dead-letter-exchange": "sq.dlx"})
				d.bind("sq", "", "return", amqp.Table{"return-to": "sq"})
			},
			retry: func(t *testing.T, conn *amqp.Connection) time.Time {
				return send(t, conn, "wait", "", amqp.Publishing{Body: []byte("r"),
					Headers: amqp.Table{"wait-for": strconv.Itoa(1000), "return-to": "sq"}})
			},
			delay: time.Second,
		},
	}
	for name, run := range runs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			l := newLive(t)
			f := parseFor(t, name+".yaml", []byte(run.spec), l.vhost)
			desired := spec.Expand(f)
			l.converge(t, desired, false)
			conn := l.b.Dial(t, l.vhost)
			run.declare(newDeclares(t, conn))
			if p, _ := l.plan(t, desired, false); len(changes(p)) > 0 {
				t.Errorf("plan after the library's declares is not empty:\n%v", changes(p))
			}
			q := f.Spec.Queues[0].Name
			took := settle(t, conn, q, run.retry(t, conn), waitguard.For(run.delay))
			t.Logf("%s: a retry due after %v came back after %v", name, run.delay, took.Round(time.Millisecond))
			// Never early: a retry back before its delay is a wrong TTL,
			// whatever the load. How late it may be is a timing goal,
			// measured by BenchmarkReturnLateness, not asserted here.
			if took < run.delay-50*time.Millisecond {
				t.Errorf("the retry came back after %v, before its delay of %v", took, run.delay)
			}
			if run.expiration > 0 && took >= run.expiration {
				t.Errorf("the retry came back after %v, on the library's own expiration of %v: the queue's TTL (%v) did not govern",
					took, run.expiration, run.delay)
			}
			rejectOne(t, conn, q)
			// Dead-lettering a rejected message takes milliseconds.
			settle(t, conn, q+".dlq", time.Now(), waitguard.For(100*time.Millisecond))
		})
	}
}

// TestGoQueueExhaustedRetryKept: GoQueue publishes the retry after its
// last one to a retry queue that does not exist; the message is kept in
// the DLQ without its per-message expiration.
func TestGoQueueExhaustedRetryKept(t *testing.T) {
	t.Parallel()
	l := newLive(t)
	desired := spec.Expand(parseFor(t, "g.yaml", []byte("version: 1\nqueues:\n  - {name: ev, preset: goqueue, retry: {delays: [1s]}}\n"), l.vhost))
	l.converge(t, desired, false)
	conn := l.b.Dial(t, l.vhost)
	send(t, conn, "ev__retry_exchange", "ev__retry.2", amqp.Publishing{Body: []byte("x"), Expiration: "1000"})
	settle(t, conn, "ev.dlq", time.Now(), waitguard.For(100*time.Millisecond)) // milliseconds
	// A window, not a guard: the message sits in ev.dlq past the 1000 ms
	// expiration it was sent with, which would have removed it had the DLQ
	// kept it. A slow machine can only make the window prove less (a late
	// expiry unseen), never fail the test.
	time.Sleep(1500 * time.Millisecond)
	if n := l.b.QueueDepth(t, l.vhost, "ev.dlq"); n != 1 {
		t.Errorf("ev.dlq holds %d messages after the retry's expiration, want 1", n)
	}
}

// TestAttributeChangesInPlace: TTL, length limit and delivery limit
// changes on a queue holding messages are policy updates: no replace, no
// --allow-destroy, messages and bindings kept. (The dead-letter exchange,
// named after the queue, is an argument: see spec/policies.go.)
func TestAttributeChangesInPlace(t *testing.T) {
	t.Parallel()
	l := newLive(t)
	const base = "version: 1\nexchanges: [{name: biz, type: topic}]\nqueues:\n  - name: work\n    type: quorum\n    bindings: [{exchange: biz, routing_key: k}]\n"
	steps := []struct {
		name, extra string
		also        []string
	}{
		{"start", "    message_ttl: 1h\n    max_length: 1000\n", nil},
		{"ttl", "    message_ttl: 2h\n    max_length: 1000\n", nil},
		{"max-length", "    message_ttl: 2h\n    max_length: 500\n", nil},
		{"delivery limit", "    message_ttl: 2h\n    max_length: 500\n    delivery_limit: 5\n", nil},
	}
	conn := l.b.Dial(t, l.vhost)
	var bindingsBefore []string
	for i, s := range steps {
		desired := spec.Expand(parseFor(t, s.name+".yaml", []byte(base+s.extra), l.vhost))
		if i == 0 {
			l.converge(t, desired, false)
			for j := 0; j < 5; j++ {
				send(t, conn, "biz", "k", amqp.Publishing{Body: []byte("m")})
			}
			_, st := l.plan(t, desired, false)
			bindingsBefore = bindingsOf(st.Topology.Bindings, "work")
			continue
		}
		p, st := l.plan(t, desired, false)
		want := append([]string{"update policy rmqtopo.queue.work"}, s.also...)
		if diff := cmp.Diff(want, changes(p)); diff != "" {
			t.Fatalf("%s: plan (-want +got):\n%s", s.name, diff)
		}
		if ds := plan.Blocking(plan.Check(p, plan.CheckOptions{})); len(ds) > 0 {
			t.Fatalf("%s: blocking diagnostics: %v", s.name, ds)
		}
		if _, err := apply.Apply(context.Background(), l.s, p, apply.Options{Records: plan.OwnRecords(st, l.specs())}); err != nil {
			t.Fatalf("%s: apply: %v", s.name, err)
		}
		if n := l.b.QueueDepth(t, l.vhost, "work"); n != 5 {
			t.Errorf("%s: work holds %d messages, want 5", s.name, n)
		}
		_, st = l.plan(t, desired, false)
		if diff := cmp.Diff(bindingsBefore, bindingsOf(st.Topology.Bindings, "work")); diff != "" {
			t.Errorf("%s: bindings of work changed (-before +after):\n%s", s.name, diff)
		}
	}
}

// bindingsOf describes the bindings into queue.
func bindingsOf(bs []topology.Binding, queue string) []string {
	var out []string
	for _, b := range bs {
		if b.Destination == queue {
			out = append(out, b.Addr().String())
		}
	}
	return out
}

// TestGoQueueTTLCap measures GoQueue's retry with and without the
// preset's policy TTL: the library sets a per-message expiration of ten
// times the documented delay (delay × 10,000 ms for a delay in seconds);
// the retry queue's policy message-ttl, the delay, wins as the lower.
func TestGoQueueTTLCap(t *testing.T) {
	t.Parallel()
	l := newLive(t)
	desired := spec.Expand(parseFor(t, "g.yaml", []byte("version: 1\nqueues:\n  - {name: ev, preset: goqueue, retry: {linear: {step: 1s, attempts: 1}}}\n"), l.vhost))
	l.converge(t, desired, false)
	conn := l.b.Dial(t, l.vhost)
	retry := func() time.Duration {
		sent := send(t, conn, "ev__retry_exchange", "ev__retry.1", amqp.Publishing{Body: []byte("r"),
			Headers: amqp.Table{"goqueue-retry-count": int64(1)}, Expiration: strconv.Itoa(1 * 10_000)})
		// Uncapped, the retry waits its whole 10 s expiration.
		took := settle(t, conn, "ev", sent, waitguard.For(10*time.Second))
		if _, ok, err := mustChannel(t, conn).Get("ev", true); !ok || err != nil {
			t.Fatalf("get from ev: %v, %v", ok, err)
		}
		return took
	}
	capped := retry()
	if err := l.c.DeletePolicy(context.Background(), l.vhost, "rmqtopo.queue.ev__retry.1"); err != nil {
		t.Fatal(err)
	}
	uncapped := retry()
	t.Logf("goqueue retry 1 (documented delay 1s, expiration 10000 ms): %v with the policy TTL, %v without",
		capped.Round(time.Millisecond), uncapped.Round(time.Millisecond))
	// Without the cap the message waits its whole expiration (never less);
	// with it, it must come back before that expiration: the one bound that
	// tells the two apart, about 9 times what the capped retry needs on a
	// quiet machine. It cannot be looser: 10,000 ms is GoQueue's own
	// expiration for a 1s retry, which the test sends as the library does.
	// How close to 1s it comes is not asserted (timing).
	if capped >= 10*time.Second || uncapped < 10*time.Second-50*time.Millisecond {
		t.Errorf("with the cap %v, without %v; want under 10s with it, the whole 10s without", capped, uncapped)
	}
	if p, _ := l.plan(t, desired, false); !cmp.Equal([]string{"create policy rmqtopo.queue.ev__retry.1"}, changes(p)) {
		t.Errorf("plan after the policy was deleted: %v", changes(p))
	}
}

func mustChannel(t *testing.T, conn *amqp.Connection) *amqp.Channel {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ch.Close() })
	return ch
}

// TestOutboxAioPikaClient runs a tiny real aio-pika client that declares
// and retries as the outbox listener does. The system Python's aio-pika is
// Debian's python3-aio-pika, which the test installs when it is missing
// and it runs as root (as make test does on CI); it is skipped only where
// it cannot.
func TestOutboxAioPikaClient(t *testing.T) {
	t.Parallel()
	const python = "/usr/bin/python3"
	have := func() bool { return exec.Command(python, "-c", "import aio_pika").Run() == nil }
	// A guard: apt-get installs it in about 3 s from Debian's mirror.
	ictx, icancel := context.WithTimeout(context.Background(), waitguard.For(10*time.Second))
	defer icancel()
	if err := brokertest.EnsureDebianPackage(ictx, "python3-aio-pika", have); err != nil {
		t.Skipf("aio-pika for %s: %v", python, err)
	}
	l := newLive(t)
	desired := spec.Expand(parseFor(t, "o.yaml", []byte("version: 1\nqueues:\n  - {name: ob, type: quorum, preset: outbox, retry: {delays: [2s]}}\n"), l.vhost))
	l.converge(t, desired, false)
	// A hang guard: Python's start-up, the declares and the client's 2 s
	// retry take 2.3 s; 6 s keeps the guard at the minute it was.
	ctx, cancel := context.WithTimeout(context.Background(), waitguard.For(6*time.Second))
	defer cancel()
	out, err := exec.CommandContext(ctx, python, "testdata/outbox_client.py", l.b.AMQPURLFor(l.vhost), "ob", "2").CombinedOutput()
	if err != nil {
		t.Fatalf("the aio-pika client failed: %v\n%s", err, out)
	}
	t.Logf("aio-pika outbox client: %s", strings.TrimSpace(string(out)))
	// Dead-lettering the rejected message is asynchronous: a guard around
	// it (milliseconds).
	waitFor(t, waitguard.For(100*time.Millisecond), "the rejected message in ob.dlq", func() bool {
		return l.b.QueueDepth(t, l.vhost, "ob.dlq") == 1
	})
	if p, _ := l.plan(t, desired, false); len(changes(p)) > 0 {
		t.Errorf("plan after the client's declares is not empty: %v", changes(p))
	}
}

// TestOperatorPolicyCap: an operator policy read from the broker caps the
// limit rmqtopo's policy sets, and the plan states the effective value.
func TestOperatorPolicyCap(t *testing.T) {
	t.Parallel()
	l := newLive(t)
	res, err := l.b.Mgmt(t).PutOperatorPolicy(l.vhost, "cap", rabbithole.OperatorPolicy{Pattern: ".*", ApplyTo: "queues",
		Definition: rabbithole.PolicyDefinition{"max-length": 10}})
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	desired := spec.Expand(parseFor(t, "c.yaml", []byte("version: 1\nqueues:\n  - {name: work, max_length: 100}\n"), l.vhost))
	p, st := l.plan(t, desired, false)
	if len(st.OperatorPolicies) != 1 {
		t.Fatalf("operator policies read: %+v", st.OperatorPolicies)
	}
	var got []string
	for _, d := range plan.Check(p, plan.CheckOptions{}) {
		if d.Code == plan.CodeOperatorPolicyCaps {
			got = append(got, d.Message)
		}
	}
	want := []string{fmt.Sprintf(`operator policy "cap" in vhost %q caps queue "work": effective max-length 10 (the spec wants 100)`, l.vhost)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("RT022 (-want +got):\n%s", diff)
	}
}

// TestUpgradeFromPerQueuePolicies: a vhost applied by an earlier rmqtopo,
// whose work queues carry their dead-lettering in their own policies, is
// upgraded by an ordinary apply that writes nothing; the queues keep their
// messages, and a reject still reaches the DLQ through the kept policy; a
// TTL change is still one policy update.
func TestUpgradeFromPerQueuePolicies(t *testing.T) {
	t.Parallel()
	l := newLive(t)
	const s = "version: 1\nexchanges: [{name: biz, type: topic}]\nqueues:\n  - name: work\n    type: quorum\n    bindings: [{exchange: biz, routing_key: k}]\n    retry: {delays: [1s]}\n"
	desired := spec.Expand(parseFor(t, "u.yaml", []byte(s), l.vhost))
	l.converge(t, shapetest.Legacy(desired), false)
	conn := l.b.Dial(t, l.vhost)
	for j := 0; j < 3; j++ {
		send(t, conn, "biz", "k", amqp.Publishing{Body: []byte("m")})
	}
	if p, _ := l.plan(t, desired, false); len(changes(p)) > 0 {
		t.Fatalf("upgrade plan is not empty: %v", changes(p))
	}
	l.converge(t, desired, false)
	if n := l.b.QueueDepth(t, l.vhost, "work"); n != 3 {
		t.Errorf("work holds %d messages after the upgrade, want 3", n)
	}
	rejectOne(t, conn, "work")
	settle(t, conn, "work.dlq", time.Now(), waitguard.For(100*time.Millisecond)) // milliseconds

	ttl := spec.Expand(parseFor(t, "u.yaml", []byte(s+"    message_ttl: 1h\n"), l.vhost))
	p, _ := l.plan(t, ttl, false)
	if diff := cmp.Diff([]string{"update policy rmqtopo.queue.work"}, changes(p)); diff != "" {
		t.Errorf("TTL change on an upgraded queue (-want +got):\n%s", diff)
	}
}
