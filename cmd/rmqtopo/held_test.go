package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/exitcode"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
)

// waitCounts are a queue's counts as the management API reports them.
type waitCounts struct {
	Messages int64  `json:"messages"`
	Ready    int64  `json:"messages_ready"`
	Unacked  int64  `json:"messages_unacknowledged"`
	DLX      *int64 `json:"messages_dlx"`
	// Delayed is what a quorum queue's delayed retry holds back (4.3).
	Delayed *int64 `json:"messages_delayed"`
}

// waitHeld waits until the management API shows the wait queue holding
// want dead-letters and nothing ready: every message expired, none
// forwarded. It checks that messages_dlx is the broker's count of the
// messages neither ready nor delivered.
func (o *online) waitHeld(t *testing.T, queue string, want int64) {
	t.Helper()
	c := o.waitCounts(t, queue, fmt.Sprintf("held %d dead-letters", want), func(c waitCounts) bool {
		return c.Ready == 0 && c.Messages == want && c.DLX != nil && *c.DLX == want
	})
	if c.Messages-c.Ready-c.Unacked != *c.DLX {
		t.Fatalf("%s: messages_dlx %d, but %d messages neither ready nor delivered", queue, *c.DLX, c.Messages-c.Ready-c.Unacked)
	}
}

// waitCounts polls the management API's counts of queue until done says
// they are what the test waits for, what, and returns them.
func (o *online) waitCounts(t *testing.T, queue, what string, done func(waitCounts) bool) waitCounts {
	t.Helper()
	var c waitCounts
	// A guard. The longest wait is for held dead-letters: the broker
	// expires the 1 s retries, dead-letters them and shows it at the next
	// statistics refresh (1 s on the test node), a few seconds on a quiet
	// machine; runs on a loaded 2-CPU machine took 7-10 s. 6 s keeps the
	// minute the guard had.
	deadline := waitguard.Deadline(6 * time.Second)
	for time.Now().Before(deadline) {
		c = waitCounts{}
		body := o.api(t, http.MethodGet, "/api/queues/"+url.PathEscape(o.vhost)+"/"+url.PathEscape(queue), "")
		if err := json.Unmarshal(body, &c); err != nil {
			t.Fatal(err)
		}
		if done(c) {
			return c
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("%s never %s: last counts %+v", queue, what, c)
	return c
}

// retry publishes n failed deliveries the way a service does: to the
// work queue's retry exchange for attempt 2, with routing key key (the
// contract says the work queue's name), so that they wait in the first
// wait queue and then dead-letter to key through the default exchange.
func retry(t *testing.T, conn *amqp.Connection, queue, key string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		brokertest.PublishConfirmed(t, conn, contract.RetryExchange(queue), key, amqp.Publishing{
			DeliveryMode: amqp.Persistent, Headers: amqp.Table{contract.HeaderAttempt: contract.AttemptValue(2)},
			Body: []byte(fmt.Sprintf("retry %d", i)),
		})
	}
}

// TestStatusStuckDeadLetters: a quorum wait queue whose work queue is
// full (max-length 1, reject-publish) holds its expired retries: the
// broker rejects each dead-letter and re-sends it only after its confirm
// timeout (180 s by default). status --exit-code re-reads the wait queue
// for --held-margin, sees it forward none, and exits 7.
func TestStatusStuckDeadLetters(t *testing.T) {
	t.Parallel()
	o := newOnline(t)
	file := o.spec(t, "full.yaml", `queues:
  - name: orders
    type: quorum
    layout: shared
    return_queue: false
    max_length: 1
    retry: {delays: [1s]}
`)
	o.must(t, 0, "apply", "--auto-approve", file)
	conn := o.b.Dial(t, o.vhost)
	brokertest.PublishConfirmed(t, conn, "", "orders", amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte("fills orders")})
	// A quorum queue takes one message past its limit before it rejects.
	brokertest.PublishConfirmed(t, conn, "", "orders", amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte("over the limit")})
	retry(t, conn, "orders", "orders", 4)
	o.waitHeld(t, "rmqtopo.wait.1s", 4)

	// --held-margin 0 only reports.
	out := o.must(t, 0, "status", "--exit-code", "--held-margin", "0", file)
	if !strings.Contains(out, "dead-letters-held") || strings.Contains(out, "stuck") {
		t.Errorf("status --held-margin 0:\n%s", out)
	}
	// The margin is a window the test spends in full: two of the test
	// node's statistics intervals (heldWindow). The broker re-sends the
	// rejected dead-letters only after 180 s, so any margin up to that
	// finds them stuck.
	start := time.Now()
	stdout, stderr, code := rmqtopo(t, "", append(heldWindowArgs(file), o.conn()...)...)
	if code != exitcode.DeadLettersStuck {
		t.Fatalf("status exited %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitcode.DeadLettersStuck, stdout, stderr)
	}
	for _, want := range []string{"dead-letters-held dead-letters-stuck", "1 wait queue forwarded none of 4 held dead-letters in " + heldWindow.String() + " (stuck)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "1 wait queue holds 4 dead-letters; re-reading for up to "+heldWindow.String()) {
		t.Errorf("stderr: %q", stderr)
	}
	// Never early: status that returns before its margin did not watch
	// the queue for it. A floor, which a busy machine cannot break.
	if d := time.Since(start); d < heldWindow {
		t.Errorf("status took %s, less than its margin", d)
	}
}

// heldWindow is the --held-margin of the tests that watch a stuck wait
// queue for it in full: two statistics intervals of the test node
// (brokertest.TestStatsInterval), so that status re-reads the counts
// twice, as it would at RabbitMQ's default interval of 5 s with its own
// least margin.
const heldWindow = 2 * brokertest.TestStatsInterval

// heldWindowArgs are the arguments of status watching spec for heldWindow,
// re-reading at the test node's statistics interval.
func heldWindowArgs(spec string) []string {
	return []string{"status", "--exit-code", "--stats-interval", brokertest.TestStatsInterval.String(),
		"--held-margin", heldWindow.String(), spec}
}

// waitMessages waits until the management API shows queue holding want
// messages: status reads its counts there, and they lag the broker.
func (o *online) waitMessages(t *testing.T, queue string, want int64) {
	t.Helper()
	o.waitCounts(t, queue, fmt.Sprintf("showed %d messages", want), func(c waitCounts) bool { return c.Messages == want })
}

// TestStatusHeldSkippedWhenOutranked: with the wait queue of
// TestStatusStuckDeadLetters holding stuck dead-letters, status --exit-code
// does not spend its 30 s margin when a DLQ holds messages (3) or a queue
// is missing (5): stuck dead-letters (7) could not change the code. Once
// neither holds, the same wait queue is re-read and found stuck (7).
func TestStatusHeldSkippedWhenOutranked(t *testing.T) {
	t.Parallel()
	o := newOnline(t)
	const body = `queues:
  - name: orders
    type: quorum
    layout: shared
    return_queue: false
    max_length: 1
    retry: {delays: [1s]}
`
	file := o.spec(t, "full.yaml", body)
	more := o.spec(t, "more.yaml", body+"  - name: invoices\n")
	o.must(t, 0, "apply", "--auto-approve", file)
	conn := o.b.Dial(t, o.vhost)
	brokertest.PublishConfirmed(t, conn, "", "orders.dlq", amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte("dead")})
	brokertest.PublishConfirmed(t, conn, "", "orders", amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte("fills orders")})
	brokertest.PublishConfirmed(t, conn, "", "orders", amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte("over the limit")})
	retry(t, conn, "orders", "orders", 4)
	o.waitHeld(t, "rmqtopo.wait.1s", 4)
	o.waitMessages(t, "orders.dlq", 1)

	quick := func(spec string, want int, margin string) {
		t.Helper()
		stdout, stderr, code := rmqtopo(t, "", append([]string{"status", "--exit-code", "--held-margin", margin, spec}, o.conn()...)...)
		if code != want {
			t.Fatalf("status exited %d, want %d\nstdout:\n%s\nstderr:\n%s", code, want, stdout, stderr)
		}
		// That it did not wait shows in stderr (checked below: "not
		// re-reading"), not in a clock a busy machine would slow.
		if !strings.Contains(stdout, "dead-letters-held") || strings.Contains(stdout, "stuck") {
			t.Errorf("stdout, want the wait queue held and not judged:\n%s", stdout)
		}
		line := fmt.Sprintf("status: 1 wait queue holds 4 dead-letters; not re-reading for --held-margin: the exit code is %d either way\n", want)
		if stderr != line {
			t.Errorf("stderr %q, want %q", stderr, line)
		}
	}
	quick(file, exitcode.DLQNotEmpty, "30s")
	quick(more, exitcode.DLQNotEmpty, "30s")

	o.api(t, http.MethodDelete, "/api/queues/"+url.PathEscape(o.vhost)+"/orders.dlq/contents", "")
	o.waitMessages(t, "orders.dlq", 0)
	quick(more, exitcode.Missing, "30s")

	// The control: nothing outranks it now, so status waits and exits 7.
	// The margin is a window spent in full, as above.
	start := time.Now()
	stdout, stderr, code := rmqtopo(t, "", append(heldWindowArgs(file), o.conn()...)...)
	if code != exitcode.DeadLettersStuck || !strings.Contains(stderr, "re-reading for up to "+heldWindow.String()) {
		t.Fatalf("status exited %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitcode.DeadLettersStuck, stdout, stderr)
	}
	if d := time.Since(start); d < heldWindow { // never early, as above
		t.Errorf("status took %s, less than its margin", d)
	}
}

// notifyWriter collects what is written to it and closes seen once it
// holds want.
type notifyWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
}

func (w *notifyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := strings.Contains(w.buf.String(), w.want)
	w.buf.Write(p)
	if !had && strings.Contains(w.buf.String(), w.want) {
		close(w.seen)
	}
	return len(p), nil
}

func (w *notifyWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestStatusHeldDeadLettersForwarded: retries published with a routing key
// that names no queue (against the contract) are held by the quorum wait
// queue, never lost. While status re-reads it, the test declares that
// queue and changes a policy on the wait queue, which makes the broker
// send the held dead-letters at once; status sees the count fall, stops
// re-reading and does not exit 7.
func TestStatusHeldDeadLettersForwarded(t *testing.T) {
	t.Parallel()
	o := newOnline(t)
	file := o.spec(t, "jobs.yaml", `queues:
  - name: jobs
    type: quorum
    layout: shared
    return_queue: false
    retry: {delays: [1s]}
`)
	o.must(t, 0, "apply", "--auto-approve", file)
	conn := o.b.Dial(t, o.vhost)
	retry(t, conn, "jobs", "lost", 3)
	o.waitHeld(t, "rmqtopo.wait.1s", 3)

	// Status re-reads every 5s (status.StatsInterval, whatever the
	// node's): one or two readings, about 10s with the broker's 1 s
	// statistics lag, see the count fall. stoppedWithin is a guard, 12 s
	// of need (measured 5 s from the policy to the exit); the margin is
	// five times the guard, so status that ran past the guard did not stop
	// early rather than ran out of margin.
	stoppedWithin := waitguard.For(12 * time.Second)
	margin := 5 * stoppedWithin
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // a status the test gave up on stops re-reading
	stderr := &notifyWriter{want: "re-reading", seen: make(chan struct{})}
	var stdout bytes.Buffer
	done := make(chan int, 1)
	go func() {
		err := run(ctx, append([]string{"status", "--exit-code", "--held-margin", margin.String(), file}, o.conn()...),
			strings.NewReader(""), &stdout, stderr)
		done <- exitCode(err, stderr)
	}()
	select {
	case <-stderr.seen:
	case code := <-done:
		t.Fatalf("status exited %d before re-reading\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	case <-time.After(waitguard.For(time.Second)): // a guard: one read of the vhost, well under 1 s
		t.Fatalf("status not re-reading after %s\nstderr:\n%s", waitguard.For(time.Second), stderr.String())
	}
	o.api(t, http.MethodPut, "/api/queues/"+url.PathEscape(o.vhost)+"/lost", `{"durable": true}`)
	o.api(t, http.MethodPut, "/api/policies/"+url.PathEscape(o.vhost)+"/poke",
		`{"pattern": "^rmqtopo\\.wait\\.1s$", "apply-to": "queues", "priority": 1000, "definition": {"max-length-bytes": 1000000000}}`)
	var code int
	select {
	case code = <-done:
	case <-time.After(stoppedWithin):
		t.Fatalf("status still re-reading %s after the wait queue forwarded (margin %s): it did not stop once it did\nstderr:\n%s",
			stoppedWithin, margin, stderr.String())
	}
	if code != 0 {
		t.Fatalf("status exited %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	if strings.Contains(stdout.String(), "stuck") || !strings.Contains(stdout.String(), "dead-letters-held") {
		t.Errorf("stdout, want the wait queue held and not stuck:\n%s", stdout.String())
	}
	// A guard: status saw them forwarded, so they are there; milliseconds.
	if n := brokertest.Drain(t, conn, "lost", 3, waitguard.For(100*time.Millisecond)); len(n) != 3 {
		t.Errorf("lost received %d dead-letters, want 3", len(n))
	}
}
