package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/rabbitmq"
	rtry "github.com/rmqtopo/rmqtopo/retry"
)

// bgEvent is one handler call of the blue-green test.
type bgEvent struct {
	broker     string
	attempt    int
	start, end time.Time
	failed     bool
}

type bgLog struct {
	mu sync.Mutex
	at map[string][]bgEvent
}

func (l *bgLog) add(id string, e bgEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.at[id] = append(l.at[id], e)
}

// bgFate is how the handlers treat id "<batch>-<n>": by n%4, succeed at
// once, fail once, fail twice or always fail; every tenth fails
// permanently.
func bgFate(id string, attempt int) error {
	_, num, _ := strings.Cut(id, "-")
	n, _ := strconv.Atoi(num)
	switch {
	case n%10 == 9:
		return rtry.Permanent(errors.New("bad payload"))
	case n%4 == 3 || attempt <= n%4:
		return fmt.Errorf("fails at attempt %d", attempt)
	}
	return nil
}

// bgConsume runs retry.Consume on bg.orders of url until the returned
// stop is called.
func bgConsume(ctx context.Context, url, broker string, log *bgLog) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = rtry.Consume(ctx, rtry.DialURL(url, amqp.Config{}), "bg.orders", func(_ context.Context, d amqp.Delivery) error {
			a, _ := rtry.Attempt(d)
			e := bgEvent{broker: broker, attempt: a, start: time.Now()}
			err := bgFate(d.MessageId, a)
			e.end, e.failed = time.Now(), err != nil
			log.add(d.MessageId, e)
			return err
		}, rtry.WithPrefetch(16), rtry.WithShutdownGrace(2*time.Second))
	}()
	return func() { cancel(); <-done }
}

// bgPublish publishes n messages to bg.orders with confirms, ids
// batch-0...
func bgPublish(t *testing.T, conn *amqp.Connection, batch string, n int) []string {
	t.Helper()
	var ids []string
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%s-%d", batch, i)
		brokertest.PublishConfirmed(t, conn, "", "bg.orders", amqp.Publishing{MessageId: id, DeliveryMode: amqp.Persistent, Body: []byte(id)})
		ids = append(ids, id)
	}
	return ids
}

// deadLetterByBroker puts n messages into blue's DLQ the broker's way
// (basic.reject without requeue), so that they carry x-death.
func deadLetterByBroker(t *testing.T, conn *amqp.Connection, n int) []string {
	t.Helper()
	ids := bgPublish(t, conn, "x", n)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	for got := 0; got < n; {
		d, ok, err := ch.Get("bg.orders", false)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if err := d.Reject(false); err != nil {
			t.Fatal(err)
		}
		got++
	}
	return ids
}

// requeuedOnce publishes n messages and returns each once with requeue
// (basic.nack), so that blue's deliveries of them carry a delivery count
// (x-delivery-count: 1 on a 3.x quorum queue), which the shovel copies:
// green's consumers must still see them at attempt 1.
func requeuedOnce(t *testing.T, conn *amqp.Connection, n int) []string {
	t.Helper()
	ids := bgPublish(t, conn, "r", n)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	var last uint64
	for got := 0; got < n; {
		d, ok, err := ch.Get("bg.orders", false)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		last = d.DeliveryTag
		got++
	}
	if err := ch.Nack(last, true, true); err != nil {
		t.Fatal(err)
	}
	return ids
}

// waitLine reads r until a line holds want; the rest of r is discarded
// in the background.
func waitLine(t *testing.T, r io.Reader, want string) {
	t.Helper()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if strings.Contains(sc.Text(), want) {
			go func() { _, _ = io.Copy(io.Discard, r) }()
			return
		}
	}
	t.Fatalf("the first run ended before printing %q", want)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// checkUpgrade waits until every id has ended (acknowledged, or in
// green's DLQ), then checks the delays and attempts of each and that
// blue is empty.
func checkUpgrade(t *testing.T, blue, green *brokertest.Broker, gconn *amqp.Connection, log *bgLog, ids []string) {
	t.Helper()
	dlq := map[string]amqp.Delivery{}
	ch, err := gconn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	deadline := time.Now().Add(90 * time.Second)
	var open []string
	for {
		for {
			d, ok, err := ch.Get("bg.orders.dlq", true)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			dlq[d.MessageId] = d
		}
		open = unfinished(log, dlq, ids)
		if len(open) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if len(open) > 0 {
		t.Fatalf("%d of %d ids never ended (acknowledged or in green's DLQ), e.g. %v", len(open), len(ids), open[:min(5, len(open))])
	}
	checkSchedules(t, log, dlq)
	queues := []string{"bg.orders", "bg.orders.dlq"}
	if p, _ := rabbitmq.ProfileOf(blue.Version(t)); !p.QuorumPriorities() {
		queues = append(queues, "bg.orders.return") // 4.0+ quorum queues have none: their retries come back by priority
	}
	for _, q := range queues {
		if n := blue.QueueDepth(t, "/", q); n != 0 {
			t.Errorf("blue's %s holds %d messages after the move", q, n)
		}
	}
}

// unfinished are the ids neither acknowledged nor in the DLQ.
func unfinished(log *bgLog, dlq map[string]amqp.Delivery, ids []string) []string {
	log.mu.Lock()
	defer log.mu.Unlock()
	var open []string
	for _, id := range ids {
		_, dead := dlq[id]
		evs := log.at[id]
		if !dead && !slices.ContainsFunc(evs, func(e bgEvent) bool { return !e.failed }) {
			open = append(open, id)
		}
	}
	return open
}

// checkSchedules checks each id's handler calls: attempts go up by one
// (a repeat is an at-least-once duplicate, counted), each retry came
// no earlier than its delay after the failure before it, and a DLQ copy
// of the helper's says the attempt it failed last; one the broker
// dead-lettered keeps its x-death.
func checkSchedules(t *testing.T, log *bgLog, dlq map[string]amqp.Delivery) {
	t.Helper()
	log.mu.Lock()
	defer log.mu.Unlock()
	var dups, moved int
	var late time.Duration
	for id, evs := range log.at {
		slices.SortFunc(evs, func(a, b bgEvent) int { return a.start.Compare(b.start) })
		if evs[0].attempt != 1 {
			t.Errorf("%s: first delivery at attempt %d", id, evs[0].attempt)
		}
		for i := 1; i < len(evs); i++ {
			p, e := evs[i-1], evs[i]
			switch {
			case e.attempt == p.attempt:
				dups++
				continue
			case e.attempt != p.attempt+1:
				t.Errorf("%s: attempt %d (on %s) after attempt %d (on %s): the schedule did not go on", id, e.attempt, e.broker, p.attempt, p.broker)
				continue
			}
			if p.broker != e.broker {
				moved++
			}
			want := bgDelays[e.attempt-2]
			gap := e.start.Sub(p.end)
			if gap < want-20*time.Millisecond {
				t.Errorf("%s: attempt %d came back %s after attempt %d failed, before its delay %s (%s -> %s)", id, e.attempt, gap, p.attempt, want, p.broker, e.broker)
			}
			late = max(late, gap-want)
		}
	}
	for id, d := range dlq {
		if strings.HasPrefix(id, "x-") {
			if _, ok := d.Headers["x-death"]; !ok {
				t.Errorf("%s: green's DLQ copy lost its x-death: %v", id, d.Headers)
			}
			continue
		}
		if _, ok := d.Headers[contract.HeaderDeadLetterReason]; !ok {
			t.Errorf("%s: green's DLQ copy has no %s: %v", id, contract.HeaderDeadLetterReason, d.Headers)
		}
		// One that always fails has all its attempts, wherever they ran,
		// and no more.
		if bgFate(id, 1) != nil && bgFate(id, 99) != nil && !errors.Is(bgFate(id, 1), rtry.ErrReject) {
			if a, _ := contract.ParseAttempt(d.Headers[contract.HeaderAttempt]); a != len(bgDelays)+1 {
				t.Errorf("%s: dead-lettered after attempt %d, want %d", id, a, len(bgDelays)+1)
			}
		}
	}
	if moved == 0 {
		t.Error("no retry failed on blue and came back on green: the test moved none")
	}
	t.Logf("%d ids, %d in green's DLQ, %d retries crossed from blue to green, %d duplicate deliveries; latest retry %s after its delay",
		len(log.at), len(dlq), moved, dups, late)
}
