package retry_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/retry"
)

// TestRetryConfirmLost: the connection of a retry's publish dies between
// the publish and its confirmation, as it did for message 663 of the
// node-loss storm (issue 46 point 7): "publish channel closed ...
// connection reset by peer", then a requeue whose nack fails too. Either
// the copy reached the broker first ("copy landed": its confirmation is
// what was lost) or it did not ("copy lost"). Every id must then be
// handled, the faulted one twice when its copy landed (the copy, and the
// original the broker gave back and that was retried again: a duplicate,
// which the helper documents), once otherwise; nothing in the DLQ, and
// nothing left in the work or the wait queue once Consume stops.
func TestRetryConfirmLost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		land    bool
		handled int // successes of the faulted id
	}{{"copy landed", true, 2}, {"copy lost", false, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			confirmLost(t, tc.land, tc.handled)
		})
	}
}

func confirmLost(t *testing.T, land bool, want int) {
	e := newEnv(t, topo{layout: "shared", queueType: "quorum", delays: []string{"100ms"}, noReturnQueue: true}, nil)
	ids := []string{"c0", "c1", "c2", "c3"}
	var msgs []amqp.Publishing
	for _, id := range ids {
		msgs = append(msgs, amqp.Publishing{DeliveryMode: amqp.Persistent, MessageId: id, Body: []byte(id)})
	}
	e.publishMany(t, bizExchange, bizKey, msgs)

	p, dial := proxiedDialer(t, e)
	fault := &cutOnPublish{p: p, land: land}
	fault.armed.Store(true)
	h := newSuccesses()
	setts := newSettlements()
	c := &consumer{obs: setts, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	// Prefetch 1: while the faulted delivery is unacked the broker sends
	// nothing else on that connection, so the first frames held back
	// are the retry's publish (client) and its confirmation (broker).
	go func() {
		c.done <- retry.Consume(ctx, dial, workQueue, h.handle, retry.WithPrefetch(1), retry.WithLogger(testLogger(t)),
			retry.WithObserver(fault), retry.WithObserver(setts), retry.WithReconnectBackoff(50*time.Millisecond, time.Second))
	}()
	t.Cleanup(func() { c.stop(t) })

	// Guards: the first delivery fails at once, and its retry's publish
	// (and, when it lands, its confirmation) take milliseconds.
	if land {
		p.waitFrame(t, waitguard.For(time.Second), fromBroker, 60, 80) // basic.ack
	} else {
		p.waitFrame(t, waitguard.For(time.Second), fromClient, 60, 40) // basic.publish
	}
	p.reset()

	// A guard: a reconnection (0.05 s backoff), the redelivery and a
	// 0.1 s retry; 0.3 s measured.
	faulted := requeuedOne(t, setts, waitguard.For(time.Second))
	wantOK := map[string]int{}
	for _, id := range ids {
		wantOK[id] = 1
	}
	wantOK[faulted] = want
	h.waitFor(t, waitguard.For(2*time.Second), wantOK)
	// A window: a duplicate beyond those would show within it. A busy
	// machine can only make it catch less, never red.
	time.Sleep(300 * time.Millisecond)
	c.stop(t)
	if diff := cmp.Diff(wantOK, h.snapshot()); diff != "" {
		t.Errorf("successes per id (-want +got):\n%s", diff)
	}
	for _, q := range []string{workQueue, contract.SharedWaitQueue(100 * time.Millisecond), contract.DeadLetterQueue(workQueue)} {
		if n := e.depth(t, q); n != 0 {
			t.Errorf("queue %s holds %d messages once the consumer stopped; want 0", q, n)
		}
	}
}

// proxiedDialer returns a cutProxy in front of e's broker and a Dialer
// through it.
func proxiedDialer(t *testing.T, e *env) (*cutProxy, retry.Dialer) {
	t.Helper()
	u, err := url.Parse(e.b.AMQPURLFor(e.vhost))
	if err != nil {
		t.Fatal(err)
	}
	p := newCutProxy(t, u.Host)
	u.Host = p.addr()
	return p, retry.DialURL(u.String(), amqp.Config{Heartbeat: 10 * time.Second})
}

// requeuedOne waits for the settlement of the faulted delivery, which
// must be the only requeue: its publish failed as the storm's did (the
// publish channel closed, the connection reset), and its nack with it.
func requeuedOne(t *testing.T, setts *settlements, guard time.Duration) string {
	t.Helper()
	requeued := func(all []retry.Settlement) []retry.Settlement {
		var r []retry.Settlement
		for _, s := range all {
			if s.Outcome == retry.Requeued {
				r = append(r, s)
			}
		}
		return r
	}
	r := requeued(setts.waitFor(t, guard, "the faulted delivery's requeue", func(all []retry.Settlement) bool { return len(requeued(all)) > 0 }))
	if len(r) != 1 || r[0].Attempt != 1 || r[0].Err == nil || !strings.Contains(r[0].Err.Error(), "publish channel closed") {
		t.Fatalf("requeues %+v; want one, of attempt 1, its publish channel closed", r)
	}
	return r[0].MessageID
}

// cutOnPublish cuts its proxy at the first copy a Retrier publishes
// (ConfirmsPending's first +1 comes just before the publish is written).
type cutOnPublish struct {
	retry.NopObserver
	p     *cutProxy
	land  bool
	armed atomic.Bool
}

func (f *cutOnPublish) ConfirmsPending(_ string, delta int) {
	if delta > 0 && f.armed.CompareAndSwap(true, false) {
		f.p.cut(f.land)
	}
}

// successes is a handler that fails every first attempt and counts the
// successes of each message id.
type successes struct {
	mu     sync.Mutex
	n      map[string]int
	notify chan struct{}
}

func newSuccesses() *successes {
	return &successes{n: map[string]int{}, notify: make(chan struct{}, 1)}
}

func (s *successes) handle(_ context.Context, d amqp.Delivery) error {
	if n, _ := retry.Attempt(d); n == 1 {
		return errors.New("first attempt fails")
	}
	s.mu.Lock()
	s.n[d.MessageId]++
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
	return nil
}

func (s *successes) snapshot() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]int, len(s.n))
	for k, v := range s.n {
		m[k] = v
	}
	return m
}

// waitFor waits until every id of want succeeded as often as it says.
func (s *successes) waitFor(t *testing.T, guard time.Duration, want map[string]int) {
	t.Helper()
	waitUntil(t, guard, fmt.Sprintf("successes %v", want), s.notify,
		func() []map[string]int { return []map[string]int{s.snapshot()} },
		func(m []map[string]int) bool {
			for id, n := range want {
				if m[0][id] < n {
					return false
				}
			}
			return true
		},
		func(m []map[string]int) string { return fmt.Sprint(m[0]) })
}
