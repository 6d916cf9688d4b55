package retry_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/retry"
	"github.com/rmqtopo/rmqtopo/spec"
)

// The ladder of these tests: 100 ms steps, 6 levels, up to 6.3 s.
const (
	levelsResolution = 100 * time.Millisecond
	// orderSlack is how far behind a message due later one may arrive in
	// TestDelayBurst: 25 times the burst's p99 lateness on a quiet machine
	// (about 0.2s), so not a timing goal, and yet a third of the burst's
	// span, which per-message TTL (the head-of-line blocking the ladder
	// avoids) puts a short delay behind a long one.
	orderSlack = 5 * time.Second
)

// levelsEnv provisions a vhost whose work queue retries through a ladder
// (exponential 200ms×2 up to 1s, 3 retries, full jitter).
func levelsEnv(tb testing.TB) (*env, contract.Ladder) {
	tb.Helper()
	return levelsEnvWith(tb, "quorum", 4*time.Second)
}

// levelsEnvWith is levelsEnv with the given level queue type and maximum.
func levelsEnvWith(tb testing.TB, waitType string, max time.Duration) (*env, contract.Ladder) {
	tb.Helper()
	b := brokertest.Get(tb)
	vhost := b.NewVhost(tb)
	doc := fmt.Sprintf(`version: 1
vhost: %q
layout: levels
wait_queue_type: %s
levels: {resolution: %s, max: %s}
exchanges: [{name: %s, type: direct}]
queues:
  - name: %s
    type: quorum
    bindings: [{exchange: %s, routing_key: %s}]
    retry: {exponential: {initial: 200ms, factor: 2, max: 1s, attempts: 3, jitter: full}}
`, vhost, waitType, levelsResolution, max, bizExchange, workQueue, bizExchange, bizKey)
	return specEnv(tb, b, vhost, doc)
}

// specEnv declares the spec doc in vhost of b, and returns its ladder.
func specEnv(tb testing.TB, b *brokertest.Broker, vhost, doc string) (*env, contract.Ladder) {
	tb.Helper()
	f, err := spec.Parse("levels.yaml", []byte(doc))
	if err != nil {
		tb.Fatalf("spec: %v\n%s", err, doc)
	}
	ladder, _ := f.Spec.Ladder()
	tp := spec.Expand(f)
	conn := b.Dial(tb, vhost)
	ch, err := conn.Channel()
	if err != nil {
		tb.Fatal(err)
	}
	defer ch.Close()
	brokertest.Declare(tb, ch, tp)
	b.CheckNoDeadLetterCycle(tb)
	return &env{b: b, vhost: vhost, conn: conn, topo: tp}, ladder
}

func newDelayer(tb testing.TB, e *env, l contract.Ladder) *retry.Delayer {
	tb.Helper()
	dl, err := retry.NewDelayer(e.conn, l, retry.WithLogger(testLogger(tb)))
	if err != nil {
		tb.Fatalf("retry.NewDelayer: %v", err)
	}
	tb.Cleanup(func() { dl.Close() })
	return dl
}

// arrival is one delayed message as the work queue's consumer saw it.
type arrival struct {
	due, at time.Time
	d       amqp.Delivery
}

// collect consumes the work queue (auto-ack) until n messages came or the
// timeout passed. timeout is a guard against loss: pass waitguard.For of
// what the n messages need.
func (e *env) collect(tb testing.TB, n int, timeout time.Duration) <-chan []arrival {
	tb.Helper()
	ch := e.channel(tb)
	deliveries, err := ch.Consume(workQueue, "", true, false, false, false, nil)
	if err != nil {
		tb.Fatal(err)
	}
	out := make(chan []arrival, 1)
	go func() {
		var got []arrival
		deadline := time.After(timeout)
		for len(got) < n {
			select {
			case d := <-deliveries:
				due, _ := d.Headers["due"].(int64)
				got = append(got, arrival{due: time.Unix(0, due), at: time.Now(), d: d})
			case <-deadline:
				out <- got
				return
			}
		}
		out <- got
	}()
	return out
}

func TestDelayArrivesOnTime(t *testing.T) {
	t.Parallel()
	e, l := levelsEnv(t)
	if l.Levels != 6 || l.MaxDelay() != 6300*time.Millisecond {
		t.Fatalf("ladder %v; the test expects 6 levels up to 6.3s", l)
	}
	dl := newDelayer(t, e, l)
	// 0, one step, a fraction of a step, odd step counts, and the maximum.
	delays := []time.Duration{0, 100 * time.Millisecond, 150 * time.Millisecond, 1300 * time.Millisecond,
		3700 * time.Millisecond, l.MaxDelay()}
	// A guard against a lost message, not a timing goal: the longest
	// delay, 6.3 s, and its lateness (6.4 s measured).
	got := e.collect(t, len(delays), waitguard.For(l.MaxDelay()+time.Second))
	for i, d := range delays {
		msg := amqp.Publishing{MessageId: fmt.Sprint(i), ContentType: "text/plain", Body: []byte("hello"),
			Expiration: "10", // would expire the message early in a level; Delay drops it
			Headers: amqp.Table{"due": time.Now().Add(d).UnixNano(), "keep": "me",
				"x-death": []any{amqp.Table{"queue": l.LevelQueue(0)}}}} // would be a cycle on 3.x
		if err := dl.Delay(context.Background(), workQueue, msg, d); err != nil {
			t.Fatal(err)
		}
	}
	arrivals := <-got
	if len(arrivals) != len(delays) {
		t.Fatalf("%d of %d delayed messages arrived", len(arrivals), len(delays))
	}
	for _, a := range arrivals {
		late := a.at.Sub(a.due)
		t.Logf("message %s (delay %s): %s late, %d levels in x-death", a.d.MessageId,
			delays[atoi(a.d.MessageId)], late.Round(time.Millisecond), deaths(a.d))
		// Never early; how late is a timing goal, BenchmarkLevelsLateness's.
		if late < -5*time.Millisecond {
			t.Errorf("message %s with delay %s arrived %s early", a.d.MessageId, delays[atoi(a.d.MessageId)], -late)
		}
		if a.d.Headers["keep"] != "me" || a.d.ContentType != "text/plain" || string(a.d.Body) != "hello" {
			t.Errorf("message %s lost its properties: %+v", a.d.MessageId, a.d)
		}
	}
}

func atoi(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}

func deaths(d amqp.Delivery) int {
	l, _ := d.Headers["x-death"].([]any)
	return len(l)
}

// TestDelayBurst sends a burst of 2,000 random delays in [0, 15s] through
// quorum levels: every message arrives, none early, and none behind one
// due more than orderSlack later: a short delay never waits behind a long
// one. How late a burst arrives is queueing in the broker (each message is
// dead-lettered once per level it waits in), which on a loaded machine
// reaches seconds: a timing goal, measured with the full burst (10,000 in
// [0, 30s]) by BenchmarkLevelsLateness, not asserted here.
// $RMQTOPO_TEST_BURST sets the number of messages.
func TestDelayBurst(t *testing.T) {
	t.Parallel()
	const span = 15 * time.Second
	n := 2_000
	if v, err := strconv.Atoi(os.Getenv("RMQTOPO_TEST_BURST")); err == nil && v > 0 {
		n = v
	}
	e, l := levelsEnvWith(t, "quorum", span)
	dl := newDelayer(t, e, l)
	// A guard against loss, not a timing goal: the span and the burst's
	// lateness (16.5 s measured).
	got := e.collect(t, n, waitguard.For(span+2*time.Second))
	rnd := rand.New(rand.NewPCG(1, 2))
	delays := make([]time.Duration, n)
	for i := range delays {
		delays[i] = time.Duration(rnd.Int64N(int64(span/time.Millisecond)+1)) * time.Millisecond
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				msg := amqp.Publishing{MessageId: fmt.Sprint(i), Headers: amqp.Table{"due": time.Now().Add(delays[i]).UnixNano()}}
				errs <- dl.Delay(context.Background(), workQueue, msg, delays[i])
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	arrivals := <-got
	if len(arrivals) != n {
		t.Fatalf("%d of %d delayed messages arrived", len(arrivals), n)
	}
	late := make([]time.Duration, n)
	var latestDue time.Time
	inversions := 0
	for i, a := range arrivals {
		late[i] = a.at.Sub(a.due)
		if late[i] < -5*time.Millisecond {
			t.Errorf("message %s arrived %s early", a.d.MessageId, -late[i])
		}
		if a.due.Before(latestDue.Add(-orderSlack)) {
			inversions++
		}
		if a.due.After(latestDue) {
			latestDue = a.due
		}
	}
	slices.Sort(late)
	p50, p99, worst := late[n/2], late[n*99/100], late[n-1]
	t.Logf("%d messages, delays 0..%s: lateness p50 %s, p99 %s, max %s; %d arrived after one due %s later",
		n, span, p50.Round(time.Millisecond), p99.Round(time.Millisecond), worst.Round(time.Millisecond),
		inversions, orderSlack)
	if inversions > 0 {
		t.Errorf("%d messages arrived behind one due more than %s later: a short delay waited behind a long one", inversions, orderSlack)
	}
}

// TestRetryThroughLevels fails one message every time: it is retried
// three times through the levels (jittered exponential: up to 200ms,
// 400ms, 800ms), then goes to the DLQ; a second message asks to be
// retried after 700ms, and never comes back earlier.
func TestRetryThroughLevels(t *testing.T) {
	t.Parallel()
	e, l := levelsEnv(t)
	backoff := retry.Exponential(200*time.Millisecond, 2, time.Second).FullJitter()
	r := newRetrier(t, e, retry.WithLevels(l, backoff))
	rec := e.consume(t, r, 4, func(_ context.Context, d amqp.Delivery) error {
		if d.MessageId == "after" {
			if n, _ := retry.Attempt(d); n == 1 {
				return retry.RetryAfter(700 * time.Millisecond)
			}
			return nil
		}
		return errors.New("always fails")
	})
	e.publish(t, amqp.Publishing{MessageId: "jitter"})
	e.publish(t, amqp.Publishing{MessageId: "after"})
	// A guard: the three jittered delays (at most 0.2+0.4+0.8 s) and the
	// levels' lateness; 0.75 s measured.
	evs := rec.waitFor(t, waitguard.For(2*time.Second), "4 deliveries of jitter, 2 of after", func(evs []event) bool {
		return count(evs, func(ev event) bool { return ev.messageID == "jitter" }) == 4 &&
			count(evs, func(ev event) bool { return ev.messageID == "after" }) == 2
	})
	prev := map[string]event{}
	for _, ev := range evs {
		p, ok := prev[ev.messageID]
		prev[ev.messageID] = ev
		if !ok {
			continue
		}
		// The copy was published after the handler of p started and before
		// its settling returned.
		atLeast, atMost := ev.at.Sub(p.at), ev.at.Sub(p.settled)
		t.Logf("%s retry %d after %s..%s (%d levels in x-death)", ev.messageID, ev.attempt-1,
			atMost.Round(time.Millisecond), atLeast.Round(time.Millisecond), deaths(amqp.Delivery{Headers: ev.headers}))
		// Never early; how late is a timing goal (BenchmarkLevelsLateness).
		if ev.messageID == "after" && atLeast < 700*time.Millisecond {
			t.Errorf("retry after 700ms came back after %s..%s", atMost, atLeast)
		}
	}
	// A guard, not a timing goal: the DLQ copy was confirmed before the
	// last delivery settled, and a passive declare's count follows it
	// closely (0.03 s measured).
	deadline := waitguard.Deadline(time.Second)
	for e.depth(t, contract.DeadLetterQueue(workQueue)) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the exhausted message is not in the DLQ")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestBackoffs(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name string
		b    retry.Backoff
		want []time.Duration // for retries 1, 2, 3, 4
	}{
		{"fixed", retry.Fixed(5 * ms), []time.Duration{5 * ms, 5 * ms, 5 * ms, 5 * ms}},
		{"linear", retry.Linear(10 * ms), []time.Duration{10 * ms, 20 * ms, 30 * ms, 40 * ms}},
		{"exponential", retry.Exponential(time.Second, 10, 500*time.Second),
			[]time.Duration{time.Second, 10 * time.Second, 100 * time.Second, 500 * time.Second}},
		{"delays", retry.Delays(2*time.Second, 5*time.Second), []time.Duration{2 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second}},
		{"after 2 immediate", retry.Delays(2*time.Second, 5*time.Second).After(2), []time.Duration{2 * time.Second, 2 * time.Second, 2 * time.Second, 5 * time.Second}},
	}
	for _, c := range cases {
		var got []time.Duration
		for n := 1; n <= 4; n++ {
			got = append(got, c.b(n))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	j := retry.Exponential(100*ms, 2, 0).FullJitter()
	seen := map[bool]bool{}
	for range 1000 {
		d := j(3)
		if d < 0 || d > 400*ms {
			t.Fatalf("full jitter of 400ms gave %s", d)
		}
		seen[d < 200*ms] = true
	}
	if len(seen) != 2 {
		t.Error("full jitter does not spread over its range")
	}
	err := fmt.Errorf("calling upstream: %w", retry.RetryAfter(37*time.Second))
	var de *retry.DelayError
	if !errors.As(err, &de) || de.Delay != 37*time.Second || errors.Is(err, retry.ErrReject) {
		t.Errorf("RetryAfter wrapped: %v", err)
	}
}

func TestDelayRefusesBadInput(t *testing.T) {
	t.Parallel()
	e, l := levelsEnv(t)
	dl := newDelayer(t, e, l)
	for _, d := range []time.Duration{-time.Millisecond, l.MaxDelay() + time.Millisecond} {
		if err := dl.Delay(context.Background(), workQueue, amqp.Publishing{}, d); err == nil {
			t.Errorf("Delay(%s) accepted", d)
		}
	}
	if err := dl.Delay(context.Background(), "", amqp.Publishing{}, 0); err == nil {
		t.Error("Delay to an empty destination accepted")
	}
	other, _ := contract.NewLadder(time.Second, time.Hour)
	if _, err := retry.NewDelayer(e.conn, other); err == nil || !strings.Contains(err.Error(), "rmqtopo apply") {
		t.Errorf("NewDelayer on a ladder that is not provisioned: %v", err)
	}
	if _, err := retry.New(e.conn, workQueue, retry.WithLevels(other, retry.Fixed(time.Second))); err == nil {
		t.Error("retry.New WithLevels of a ladder that is not provisioned succeeded")
	}
}
