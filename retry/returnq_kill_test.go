package retry_test

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
)

// TestWorkerKilledWithReturnQueue: the example worker, serving a queue
// with a return queue, is killed with SIGKILL between the confirmation of
// a retry and the ack of its original. A second worker gets the original
// again and the retry through the return queue: one duplicate, nothing
// lost, nothing left behind in any queue.
func TestWorkerKilledWithReturnQueue(t *testing.T) {
	t.Parallel()
	bin := buildWorker(t, t.TempDir())
	for _, layout := range []string{"shared", "per-attempt"} {
		t.Run(layout, func(t *testing.T) {
			e := newEnv(t, topo{layout: layout, queueType: "quorum", delays: []string{"100ms"}, returnQueue: true}, nil)
			e.publishMany(t, bizExchange, bizKey, []amqp.Publishing{
				{MessageId: "k1", Body: []byte("1")}, {MessageId: "k2", Body: []byte("2")}, {MessageId: "k3", Body: []byte("3")},
			})
			w := startWorker(t, bin, e, []string{"RMQTOPO_WORKER_CRASH_AFTER_CONFIRM=1"}, "--fail-first", "1", "--prefetch", "1")
			var ee *exec.ExitError
			// A guard: it kills itself at its first retry's confirmation
			// (0.02 s measured).
			if err := w.wait(t, waitguard.For(time.Second)); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("worker ended with %v, want killed by SIGKILL; stderr:\n%s", err, w.stderr.String())
			}
			w = startWorker(t, bin, e, nil, "--prefetch", "4")
			// A guard: a redelivery, and the retry through the return
			// queue (0.1 s measured).
			w.waitLines(t, 4, waitguard.For(time.Second))
			// A window: anything more would show by now. A busy machine
			// can only make it catch less, never red.
			time.Sleep(300 * time.Millisecond)
			acks := map[string]map[int]int{}
			for _, l := range w.snapshot() {
				if l.Outcome != "ack" {
					t.Errorf("line %+v; want acks only", l)
				}
				if acks[l.MessageID] == nil {
					acks[l.MessageID] = map[int]int{}
				}
				acks[l.MessageID][l.Attempt]++
			}
			// k1: the original, redelivered, and its confirmed retry.
			want := map[string]map[int]int{"k1": {1: 1, 2: 1}, "k2": {1: 1}, "k3": {1: 1}}
			if diff := cmp.Diff(want, acks); diff != "" {
				t.Errorf("acked attempts per message (-want +got):\n%s", diff)
			}
			for _, q := range []string{workQueue, contract.ReturnQueue(workQueue), contract.DeadLetterQueue(workQueue)} {
				if n := e.depth(t, q); n != 0 {
					t.Errorf("queue %s holds %d", q, n)
				}
			}
		})
	}
}
