package retry_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/retry"
)

// seen is one delivery a test handler saw.
type seen struct {
	id      string
	attempt int
	at      time.Time
	tag     string
}

// sightings records deliveries, and when each attempt of a message failed.
type sightings struct {
	mu     sync.Mutex
	all    []seen
	failed map[string]time.Time // id/attempt
}

func (s *sightings) add(d amqp.Delivery, fail bool) {
	a, _ := retry.Attempt(d)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.all = append(s.all, seen{id: d.MessageId, attempt: a, at: time.Now(), tag: d.ConsumerTag})
	if fail {
		s.failed[fmt.Sprintf("%s/%d", d.MessageId, a)] = time.Now()
	}
}

func (s *sightings) snapshot() ([]seen, map[string]time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	failed := make(map[string]time.Time, len(s.failed))
	for k, v := range s.failed {
		failed[k] = v
	}
	return append([]seen(nil), s.all...), failed
}

// TestConsumeReturnQueue: behind a backlog, with a return queue, every
// message of a run where one in five always fails is delivered exactly as
// its schedule says (attempts 1 to 3, then the DLQ as exhausted), no
// retry comes before its delay, the retries come through the return
// queue's consumer, and nothing is left in any queue.
func TestConsumeReturnQueue(t *testing.T) {
	for _, layout := range []string{"shared", "per-attempt"} {
		t.Run(layout, func(t *testing.T) {
			t.Parallel()
			delays := []time.Duration{300 * time.Millisecond, 600 * time.Millisecond}
			e := newEnv(t, topo{layout: layout, queueType: "quorum", delays: []string{"300ms", "600ms"}, returnQueue: true}, nil)
			const n = 500
			msgs := make([]amqp.Publishing, n)
			for i := range msgs {
				msgs[i] = amqp.Publishing{MessageId: fmt.Sprintf("m%04d", i), DeliveryMode: amqp.Persistent}
			}
			e.publishMany(t, bizExchange, bizKey, msgs) // the backlog is there before the consumer
			fails := func(id string) bool { var i int; fmt.Sscanf(id, "m%d", &i); return i%5 == 0 }
			s := &sightings{failed: map[string]time.Time{}}
			c := startConsume(t, e, func(_ context.Context, d amqp.Delivery) error {
				f := fails(d.MessageId)
				time.Sleep(time.Millisecond)
				s.add(d, f)
				if f {
					return errors.New("always fails")
				}
				return nil
			}, retry.WithPrefetch(4))
			// A guard: a fifth of the 500 go through both delays (0.9 s)
			// behind the backlog, 1.8 s measured; 6 s keeps the minute
			// this guard had.
			dlq := brokertest.Drain(t, e.b.Dial(t, e.vhost), contract.DeadLetterQueue(workQueue), n/5, waitguard.For(6*time.Second))
			c.stop(t)
			all, failed := s.snapshot()
			checkReturnRun(t, all, failed, delays, n, fails)
			for _, d := range dlq {
				if r := d.Headers[contract.HeaderDeadLetterReason]; !fails(d.MessageId) || r != contract.ReasonExhausted {
					t.Errorf("DLQ holds %s with reason %v", d.MessageId, r)
				}
			}
			for _, q := range []string{workQueue, contract.ReturnQueue(workQueue), contract.DeadLetterQueue(workQueue)} {
				if d := e.depth(t, q); d != 0 {
					t.Errorf("%s holds %d at the end", q, d)
				}
			}
		})
	}
}

// checkReturnRun checks the deliveries of TestConsumeReturnQueue.
func checkReturnRun(t *testing.T, all []seen, failed map[string]time.Time, delays []time.Duration, n int, fails func(string) bool) {
	t.Helper()
	count := map[string]int{}
	viaReturn := 0
	for _, x := range all {
		count[fmt.Sprintf("%s/%d", x.id, x.attempt)]++
		if x.attempt < 2 {
			continue
		}
		if x.tag == "rmqtopo-retry-return" {
			viaReturn++
		}
		prev, ok := failed[fmt.Sprintf("%s/%d", x.id, x.attempt-1)]
		if !ok {
			t.Errorf("%s attempt %d delivered, but attempt %d never failed", x.id, x.attempt, x.attempt-1)
			continue
		}
		if wait := x.at.Sub(prev); wait < delays[x.attempt-2] {
			t.Errorf("%s attempt %d came %v after its failure, before its delay %v", x.id, x.attempt, wait, delays[x.attempt-2])
		}
	}
	for i := range n {
		id := fmt.Sprintf("m%04d", i)
		last := 1
		if fails(id) {
			last = 3
		}
		for a := 1; a <= 3; a++ {
			want := 0
			if a <= last {
				want = 1
			}
			if got := count[fmt.Sprintf("%s/%d", id, a)]; got != want {
				t.Errorf("%s attempt %d delivered %d times; want %d", id, a, got, want)
			}
		}
	}
	if viaReturn == 0 {
		t.Error("no retry came through the return queue's consumer")
	}
}

// TestReturnQueueHandsOver: a consumer that reads only the work queue (a
// service with its own loop, or one that is not the helper) still gets
// every retry: a retry waits out the handover in the return queue, then
// moves on to the work queue.
func TestReturnQueueHandsOver(t *testing.T) {
	for _, layout := range []string{"shared", "per-attempt"} {
		t.Run(layout, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, topo{layout: layout, queueType: "quorum", delays: []string{"200ms"}, returnQueue: true}, nil)
			r := newRetrier(t, e)
			rec := e.consume(t, r, 2, func(_ context.Context, d amqp.Delivery) error {
				if a, _ := retry.Attempt(d); a == 1 {
					return errors.New("first attempt fails")
				}
				return nil
			})
			const n = 20
			msgs := make([]amqp.Publishing, n)
			for i := range msgs {
				msgs[i] = amqp.Publishing{MessageId: fmt.Sprintf("h%02d", i)}
			}
			e.publishMany(t, bizExchange, bizKey, msgs)
			// A guard: each retry waits out the handover in the return
			// queue (contract.ReturnQueueHandover, 5 s); 5.2 s measured.
			evs := rec.waitFor(t, waitguard.For(contract.ReturnQueueHandover+time.Second), "every second attempt", func(evs []event) bool {
				return count(evs, func(ev event) bool { return ev.attempt == 2 }) >= n
			})
			// A window: a duplicate would show by now. A busy machine can
			// only make it catch less, never red.
			time.Sleep(300 * time.Millisecond)
			evs = rec.snapshot()
			if got := count(evs, func(ev event) bool { return ev.attempt == 2 }); got != n {
				t.Errorf("%d second attempts; want %d", got, n)
			}
			for _, ev := range evs {
				if ev.attempt == 2 && !diedIn(ev.headers, contract.ReturnQueue(workQueue)) {
					t.Errorf("%s came back without passing the return queue: x-death %v", ev.messageID, ev.headers["x-death"])
				}
			}
			if d := e.depth(t, contract.ReturnQueue(workQueue)); d != 0 {
				t.Errorf("the return queue holds %d", d)
			}
		})
	}
}

// diedIn reports whether headers' x-death names queue.
func diedIn(headers amqp.Table, queue string) bool {
	deaths, _ := headers["x-death"].([]any)
	for _, d := range deaths {
		if t, ok := d.(amqp.Table); ok && t["queue"] == queue {
			return true
		}
	}
	return false
}

// TestConsumeReturnQueueSurvivesClosedConnections is
// TestConsumeSurvivesClosedConnections with a return queue: the broker
// closes the consumer's connection twice, and every message still ends
// acked or dead-lettered, with duplicates counted.
func TestConsumeReturnQueueSurvivesClosedConnections(t *testing.T) {
	t.Parallel()
	e := newEnv(t, topo{layout: "shared", queueType: "quorum", immediate: 1, delays: []string{"100ms", "200ms"}, returnQueue: true}, nil)
	lossRun{n: 3_000, attempts: 4, breaks: []int{600, 1_800},
		brk: func(t *testing.T, c *consumer) { c.closeConnection(t, e.b) },
	}.run(t, e)
	if d := e.depth(t, contract.ReturnQueue(workQueue)); d != 0 {
		t.Errorf("the return queue holds %d", d)
	}
}
