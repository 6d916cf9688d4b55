package retry_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/rabbitmq"
	"github.com/rmqtopo/rmqtopo/retry"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

// plainBacklog is the backlog of the plain-consumer tests, and plainWork
// what the consumer spends on each message: draining it takes at least
// 3 s, far more than the delay, so a retry that waited behind it would
// show.
const (
	plainBacklog = 1_500
	plainWork    = 2 * time.Millisecond
	plainDelay   = 300 * time.Millisecond
)

// TestPlainConsumerGetsRetriesOnTime is issue 43's "every consumer gets
// its retries on time": a consumer that is not retry.Consume, behind a
// backlog, gets a delayed message (a Delayer's, on layout levels) and a
// retry (made by its own loop of New and Handle, on layout shared) when it
// is due, on the topology that auto gives a new queue on the broker's
// release. On 4.0+ that topology has no return queue and the message comes
// back at contract.RetryPriority, ahead of the backlog: the test asserts
// it is never early, overtakes the backlog (backlog messages arrive after
// it) and is less late than the return queue's handover. Below 4.0 a
// return queue holds it for retry.Consume, and the plain consumer gets it
// only after the handover, as plan's RT111 says: the test asserts that.
// How late, against the return queue, is BenchmarkPlainConsumerBacklog's.
func TestPlainConsumerGetsRetriesOnTime(t *testing.T) {
	for _, layout := range []string{"levels", "shared"} {
		t.Run(layout, func(t *testing.T) {
			t.Parallel()
			b := brokertest.Get(t)
			v, err := topology.ParseVersion(b.Version(t))
			if err != nil {
				t.Fatal(err)
			}
			e, ladder := resolvedEnv(t, b, layout, v)
			msgs := make([]amqp.Publishing, plainBacklog)
			for i := range msgs {
				msgs[i] = amqp.Publishing{MessageId: fmt.Sprintf("b%04d", i)}
			}
			e.publishMany(t, bizExchange, bizKey, msgs)
			due, seen := plainRun(t, e, ladder, layout)
			got := seen.at
			late := got.Sub(due)
			t.Logf("RabbitMQ %s, %s: due after %s, arrived %s late with %d of %d backlog messages still to come",
				v, layout, plainDelay, late.Round(time.Millisecond), seen.after, plainBacklog)
			if late < -5*time.Millisecond {
				t.Errorf("arrived %s early", -late)
			}
			if !rabbitmq.ProfileFor(v).QuorumPriorities() {
				if late < contract.ReturnQueueHandover-100*time.Millisecond {
					t.Errorf("arrived %s late; RT111 says a return queue's handover (%s) first", late, contract.ReturnQueueHandover)
				}
				return
			}
			if seen.after == 0 || late >= contract.ReturnQueueHandover {
				t.Errorf("arrived %s late with %d backlog messages after it: want ahead of the backlog, and before a return queue would have handed it over (%s)",
					late, seen.after, contract.ReturnQueueHandover)
			}
			if seen.priority != contract.RetryPriority {
				t.Errorf("priority %d; want %d", seen.priority, contract.RetryPriority)
			}
		})
	}
}

// resolvedEnv provisions a quorum work queue of layout (levels or shared,
// one 300 ms retry) in a fresh vhost of b, as a plan for release v lays
// out a new queue (spec.Resolve), and returns its ladder.
func resolvedEnv(t *testing.T, b *brokertest.Broker, layout string, v topology.Version) (*env, contract.Ladder) {
	t.Helper()
	vhost := b.NewVhost(t)
	doc := fmt.Sprintf(`version: 1
vhost: %q
layout: %s
levels: {resolution: 100ms, max: 1s}
exchanges: [{name: %s, type: direct}]
queues:
  - name: %s
    type: quorum
    bindings: [{exchange: %s, routing_key: %s}]
    retry: {delays: [%s]}
`, vhost, layout, bizExchange, workQueue, bizExchange, bizKey, plainDelay)
	f, err := spec.Parse("plain.yaml", []byte(doc))
	if err != nil {
		t.Fatalf("spec: %v\n%s", err, doc)
	}
	spec.Resolve([]*spec.File{f}, spec.Target{RabbitMQ: v})
	if got, want := spec.ReturnTo(f.Spec.Queues[0]) != workQueue, !rabbitmq.ProfileFor(v).QuorumPriorities(); got != want {
		t.Fatalf("RabbitMQ %s: a return queue %v; want %v", v, got, want)
	}
	ladder, _ := f.Spec.Ladder()
	tp := spec.ExpandFor(v, f)
	conn := b.Dial(t, vhost)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	putPolicies(t, b, tp)
	brokertest.Declare(t, ch, tp)
	return &env{b: b, vhost: vhost, conn: conn, topo: tp}, ladder
}

// sighting is the delayed message as the plain consumer saw it.
type sighting struct {
	at       time.Time
	after    int // backlog messages delivered after it
	priority uint8
}

// plainRun consumes the work queue with a plain loop (prefetch 10, each
// message plainWork), handing every delivery to a Retrier's Handle, and
// meanwhile sends one message "x" through layout's delay: a Delayer's
// Delay on levels, else a first attempt that fails. It returns when x was
// due and when it arrived, once the backlog is drained.
func plainRun(t *testing.T, e *env, ladder contract.Ladder, layout string) (time.Time, sighting) {
	t.Helper()
	var opts []retry.Option
	if layout == "levels" {
		opts = append(opts, retry.WithLevels(ladder, retry.Fixed(plainDelay)))
	}
	r := newRetrier(t, e, opts...)
	ch := e.channel(t)
	if err := ch.Qos(10, 0, false); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume(workQueue, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var due time.Time
	if layout == "levels" {
		dl := newDelayer(t, e, ladder)
		due = time.Now().Add(plainDelay)
		if err := dl.Delay(context.Background(), workQueue, amqp.Publishing{MessageId: "x"}, plainDelay); err != nil {
			t.Fatal(err)
		}
	} else {
		e.publish(t, amqp.Publishing{MessageId: "x", Priority: contract.RetryPriority}) // its first attempt, ahead too
	}
	handle := r.Handle(func(_ context.Context, d amqp.Delivery) error {
		time.Sleep(plainWork)
		if a, _ := retry.Attempt(d); d.MessageId == "x" && a == 1 && layout != "levels" {
			due = time.Now().Add(plainDelay)
			return errors.New("x fails once")
		}
		return nil
	})
	var seen sighting
	found, rest := false, 0
	// A guard against loss: the drain (3 s and more) and the handover.
	guard := time.After(waitguard.For(plainBacklog*plainWork + contract.ReturnQueueHandover + 5*time.Second))
	for rest < plainBacklog || !found {
		select {
		case d := <-deliveries:
			a, _ := retry.Attempt(d)
			switch {
			case d.MessageId == "x" && (a == 2 || layout == "levels"):
				seen, found = sighting{at: time.Now(), priority: d.Priority}, true
			case d.MessageId != "x":
				rest++
				if found {
					seen.after++
				}
			}
			if _, err := handle(context.Background(), d); err != nil {
				t.Fatalf("settling %s: %v", d.MessageId, err)
			}
		case <-guard:
			t.Fatalf("%d of %d backlog messages, x seen %v: lost?", rest, plainBacklog, found)
		}
	}
	return due, seen
}
