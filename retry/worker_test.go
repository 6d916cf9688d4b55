package retry_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
)

// buildWorker builds examples/worker into dir.
func buildWorker(t *testing.T, dir string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(dir, "worker")
	cmd := exec.Command(goBin, "build", "-o", bin, "github.com/rmqtopo/rmqtopo/examples/worker")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build examples/worker: %v\n%s", err, out)
	}
	return bin
}

// workerLine is one line of the worker's stdout.
type workerLine struct {
	Time      string `json:"time"`
	Queue     string `json:"queue"`
	MessageID string `json:"message_id"`
	Attempt   int    `json:"attempt"`
	Outcome   string `json:"outcome"`
}

// worker is a running examples/worker process.
type worker struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	mu     sync.Mutex
	lines  []workerLine
	more   chan struct{}
	exited chan struct{}
	err    error // of Wait, once exited
}

func startWorker(t *testing.T, bin string, e *env, extraEnv []string, args ...string) *worker {
	t.Helper()
	w := &worker{more: make(chan struct{}, 1), exited: make(chan struct{})}
	w.cmd = exec.Command(bin, append([]string{"--queue", workQueue}, args...)...)
	w.cmd.Env = append(append(os.Environ(), "RMQTOPO_AMQP_URL="+e.b.AMQPURLFor(e.vhost)), extraEnv...)
	w.cmd.Stderr = &w.stderr
	stdout, err := w.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var l workerLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				l = workerLine{Outcome: "unparseable: " + sc.Text()}
			}
			w.mu.Lock()
			w.lines = append(w.lines, l)
			w.mu.Unlock()
			select {
			case w.more <- struct{}{}:
			default:
			}
		}
		w.err = w.cmd.Wait()
		close(w.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-w.exited:
		default:
			_ = w.cmd.Process.Kill()
			<-w.exited
		}
	})
	return w
}

func (w *worker) snapshot() []workerLine {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]workerLine(nil), w.lines...)
}

// waitLines waits until w printed n lines; timeout is a guard (pass
// waitguard.For of what the wait needs).
func (w *worker) waitLines(t *testing.T, n int, timeout time.Duration) []workerLine {
	t.Helper()
	deadline := time.After(timeout)
	for {
		if ls := w.snapshot(); len(ls) >= n {
			return ls
		}
		select {
		case <-w.more:
		case <-w.exited:
			if ls := w.snapshot(); len(ls) >= n {
				return ls
			}
			t.Fatalf("worker exited (%v) after %d of %d lines; stderr:\n%s", w.err, len(w.snapshot()), n, w.stderr.String())
		case <-deadline:
			t.Fatalf("worker printed %d of %d lines in %v; stderr:\n%s", len(w.snapshot()), n, timeout, w.stderr.String())
		}
	}
}

// wait waits until w exits and returns Wait's error; timeout is a guard.
func (w *worker) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case <-w.exited:
		return w.err
	case <-time.After(timeout):
		t.Fatalf("worker still running after %v; stderr:\n%s", timeout, w.stderr.String())
		return nil
	}
}

// TestWorker runs examples/worker as other tooling does.
func TestWorker(t *testing.T) {
	t.Parallel()
	bin := buildWorker(t, t.TempDir())

	t.Run("output", func(t *testing.T) {
		e := newEnv(t, topo{layout: "per-attempt", queueType: "classic", delays: []string{"100ms"}}, nil)
		w := startWorker(t, bin, e, nil, "--fail-first", "1", "--prefetch", "2")
		e.publish(t, amqp.Publishing{MessageId: "w1", Body: []byte("x")})
		// A guard: the worker starts, fails, retries after 0.1 s; 0.11 s
		// measured.
		ls := w.waitLines(t, 2, waitguard.For(time.Second))
		var got []workerLine
		for _, l := range ls {
			if _, err := time.Parse(time.RFC3339Nano, l.Time); err != nil {
				t.Errorf("time %q: %v", l.Time, err)
			}
			l.Time = ""
			got = append(got, l)
		}
		want := []workerLine{
			{Queue: workQueue, MessageID: "w1", Attempt: 1, Outcome: "retry"},
			{Queue: workQueue, MessageID: "w1", Attempt: 2, Outcome: "ack"},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("worker output (-want +got):\n%s", diff)
		}
		_ = w.cmd.Process.Signal(syscall.SIGTERM)
		// A guard: no handler is running, it exits at once (2 ms).
		if err := w.wait(t, waitguard.For(time.Second)); err != nil {
			t.Errorf("worker exit after SIGTERM: %v; stderr:\n%s", err, w.stderr.String())
		}
	})

	t.Run("reject", func(t *testing.T) {
		e := newEnv(t, topo{layout: "per-attempt", queueType: "classic", delays: []string{"100ms"}}, nil)
		w := startWorker(t, bin, e, nil, "--reject")
		e.publish(t, amqp.Publishing{MessageId: "w2", Body: []byte("x")})
		// A guard: the worker starts and dead-letters (0.01 s measured).
		if l := w.waitLines(t, 1, waitguard.For(time.Second))[0]; l.Outcome != "dead-letter" || l.MessageID != "w2" {
			t.Errorf("line %+v; want w2 dead-letter", l)
		}
	})

	t.Run("missing topology", func(t *testing.T) {
		b := newEnv(t, topo{layout: "per-attempt", queueType: "classic", delays: []string{"100ms"}}, nil)
		w := startWorker(t, bin, b, nil, "--queue", "nonexistent")
		// A guard: the worker checks the topology as it starts, and exits
		// (7 ms measured).
		err := w.wait(t, waitguard.For(time.Second))
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !bytes.Contains(w.stderr.Bytes(), []byte("rmqtopo apply")) {
			t.Errorf("worker on a queue without topology: %v; stderr:\n%s", err, w.stderr.String())
		}
	})

	// SIGKILL between the confirmation of a retry and the ack of the
	// original: the broker redelivers the original and the retry arrives
	// too. One duplicate, nothing lost.
	t.Run("crash after confirm", func(t *testing.T) {
		e := newEnv(t, topo{layout: "per-attempt", queueType: "quorum", delays: []string{"100ms"}}, nil)
		e.publishMany(t, bizExchange, bizKey, []amqp.Publishing{
			{MessageId: "c1", Body: []byte("1")}, {MessageId: "c2", Body: []byte("2")}, {MessageId: "c3", Body: []byte("3")},
		})
		w := startWorker(t, bin, e, []string{"RMQTOPO_WORKER_CRASH_AFTER_CONFIRM=1"}, "--fail-first", "1", "--prefetch", "1")
		// A guard: it kills itself at its first retry's confirmation
		// (0.02 s measured).
		err := w.wait(t, waitguard.For(time.Second))
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("worker ended with %v, want killed by SIGKILL; stderr:\n%s", err, w.stderr.String())
		}
		if ls := w.snapshot(); len(ls) != 0 {
			t.Errorf("the crashed worker printed %v", ls)
		}

		w = startWorker(t, bin, e, nil, "--prefetch", "4")
		// A guard: a redelivery and the 0.1 s retry (0.1 s measured).
		ls := w.waitLines(t, 4, waitguard.For(time.Second))
		// A window: anything more would show by now. A busy machine can
		// only make it catch less, never red.
		time.Sleep(300 * time.Millisecond)
		ls = w.snapshot()
		acks := map[string][]int{}
		for _, l := range ls {
			if l.Outcome != "ack" {
				t.Errorf("line %+v; want acks only", l)
			}
			acks[l.MessageID] = append(acks[l.MessageID], l.Attempt)
		}
		for _, a := range acks {
			if len(a) == 2 && a[0] > a[1] {
				a[0], a[1] = a[1], a[0]
			}
		}
		want := map[string][]int{"c1": {1, 2}, "c2": {1}, "c3": {1}} // c1: the original and its retry
		if diff := cmp.Diff(want, acks); diff != "" {
			t.Errorf("acked attempts per message (-want +got):\n%s", diff)
		}
		for _, q := range []string{workQueue, contract.DeadLetterQueue(workQueue)} {
			if n := e.depth(t, q); n != 0 {
				t.Errorf("queue %s holds %d", q, n)
			}
		}
	})

	// SIGTERM with every handler in its work: the worker cancels them,
	// requeues their deliveries unchanged and exits 0; a second worker
	// finishes the batch. Every message is then delivered as attempt 1
	// (failed, retried) and attempt 2 (acked), whatever the shutdown
	// requeued: it consumed no attempt. The first worker's work never ends
	// (--work 1h), so when the queue has handed out its prefetch the
	// handlers are in their work for certain: a SIGTERM timed after an ack
	// once fell between two deliveries of every handler.
	t.Run("sigterm", func(t *testing.T) {
		const n, prefetch = 48, 8
		e := newEnv(t, topo{layout: "per-attempt", queueType: "quorum", delays: []string{"100ms"}}, nil)
		msgs := make([]amqp.Publishing, n)
		for i := range msgs {
			msgs[i] = amqp.Publishing{MessageId: fmt.Sprintf("s%03d", i), Body: []byte("x")}
		}
		e.publishMany(t, bizExchange, bizKey, msgs)
		args := []string{"--prefetch", strconv.Itoa(prefetch), "--fail-first", "1", "--work", "1h"}
		w := startWorker(t, bin, e, nil, args...)
		// A guard against a hung worker, not a goal: it starts and takes
		// its prefetch in 0.03 s; 6 s keeps the minute this guard had.
		guard := waitguard.For(6 * time.Second)
		for deadline := time.Now().Add(guard); e.depth(t, workQueue) != n-prefetch; {
			if time.Now().After(deadline) {
				t.Fatalf("the worker had not taken its prefetch after %v; stderr:\n%s", guard, w.stderr.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		// A guard: with no grace the handlers are cancelled at once, their
		// deliveries requeued, and the worker exits (5 ms measured).
		if err := w.wait(t, waitguard.For(time.Second)); err != nil {
			t.Fatalf("worker exit after SIGTERM: %v; stderr:\n%s", err, w.stderr.String())
		}
		args[len(args)-1] = "10ms"
		first := w.snapshot()
		w2 := startWorker(t, bin, e, nil, args...)
		acked := 0
		for _, l := range first {
			if l.Outcome == "ack" {
				acked++
			}
		}
		// A guard: 48 messages, each failed once and retried after 0.1 s,
		// 0.2 s measured; 6 s keeps the minute this guard had.
		waitOutcome(t, w2, "ack", n-acked, waitguard.For(6*time.Second))
		// A window: anything more would show by now. A busy machine can
		// only make it catch less, never red.
		time.Sleep(300 * time.Millisecond)

		seen := map[string][]string{}
		requeued := 0
		for _, l := range append(first, w2.snapshot()...) {
			if l.Outcome == "requeue" {
				requeued++
				continue
			}
			seen[l.MessageID] = append(seen[l.MessageID], fmt.Sprintf("%d:%s", l.Attempt, l.Outcome))
		}
		want := map[string][]string{}
		for _, m := range msgs {
			want[m.MessageId] = []string{"1:retry", "2:ack"}
		}
		if diff := cmp.Diff(want, seen); diff != "" {
			t.Errorf("attempt:outcome per message, requeues left out (-want +got):\n%s", diff)
		}
		if requeued != prefetch {
			t.Errorf("the SIGTERM requeued %d deliveries unchanged; want the %d in their handlers", requeued, prefetch)
		}
		t.Logf("%d acked before the SIGTERM, %d requeued unchanged by it", acked, requeued)
		for _, q := range []string{workQueue, contract.DeadLetterQueue(workQueue)} {
			if d := e.depth(t, q); d != 0 {
				t.Errorf("queue %s holds %d", q, d)
			}
		}
	})
}

// waitOutcome waits until w printed k lines with outcome; timeout is a
// guard.
func waitOutcome(t *testing.T, w *worker, outcome string, k int, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		got := 0
		for _, l := range w.snapshot() {
			if l.Outcome == outcome {
				got++
			}
		}
		if got >= k {
			return
		}
		select {
		case <-w.more:
		case <-time.After(100 * time.Millisecond):
		case <-w.exited:
			t.Fatalf("worker exited (%v) after %d of %d %s lines; stderr:\n%s", w.err, got, k, outcome, w.stderr.String())
		case <-deadline:
			t.Fatalf("worker printed %d of %d %s lines in %v; stderr:\n%s", got, k, outcome, timeout, w.stderr.String())
		}
	}
}

func drainAll(t *testing.T, e *env, queue string, n int) []amqp.Delivery {
	t.Helper()
	ch := e.channel(t)
	var out []amqp.Delivery
	for range n {
		d, ok, err := ch.Get(queue, true)
		if err != nil || !ok {
			t.Fatalf("get from %s: ok=%v err=%v", queue, ok, err)
		}
		out = append(out, d)
	}
	return out
}
