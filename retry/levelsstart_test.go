package retry_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/retry"
)

// TestConsumeRefusesAWrongLadder: a ladder that is not the spec's (here
// the default 100ms up to 7 days, against the test spec's 4 s) fails
// Consume's first start at once, as a missing queue does, naming the
// ladder's missing exchange, instead of reconnecting until the context
// ends.
func TestConsumeRefusesAWrongLadder(t *testing.T) {
	t.Parallel()
	e, specLadder := levelsEnv(t)
	wrong, err := contract.NewLadder(100*time.Millisecond, 168*time.Hour)
	if err != nil || wrong == specLadder {
		t.Fatalf("the wrong ladder %v (%v) is the spec's %v", wrong, err, specLadder)
	}
	// A guard: the start is one dial and a few passive declares.
	ctx, cancel := context.WithTimeout(context.Background(), waitguard.For(3*time.Second))
	defer cancel()
	err = retry.Consume(ctx, retry.DialURL(e.b.AMQPURLFor(e.vhost), amqp.Config{}), workQueue,
		func(context.Context, amqp.Delivery) error { return nil },
		retry.WithLogger(testLogger(t)), retry.WithLevels(wrong, retry.Fixed(time.Second)))
	switch {
	case ctx.Err() != nil:
		t.Fatalf("Consume ran until its context ended (%v); want an error at the first start", err)
	case err == nil:
		t.Fatal("Consume returned nil with a ladder the broker does not have")
	}
	if msg := err.Error(); !strings.Contains(msg, wrong.EntryExchange()) || !strings.Contains(msg, "retry topology missing") {
		t.Errorf("Consume: %q; want the missing exchange %q named and `retry topology missing`", msg, wrong.EntryExchange())
	}
	_, err = retry.New(e.conn, workQueue, retry.WithLevels(wrong, retry.Fixed(time.Second)))
	if err == nil || !strings.Contains(err.Error(), wrong.EntryExchange()) {
		t.Errorf("New with the wrong ladder: %v; want the missing exchange named", err)
	}
}

// TestConsumeRefusesLevelsWithoutTheLadder: a queue whose layout is levels,
// consumed without WithLevels, fails Consume's first start, naming the
// option, before it takes any delivery: its retry copies would match no
// stage of the ladder and come back as if the schedule were over, so
// every failure went to the DLQ at once as exhausted. New refuses too.
func TestConsumeRefusesLevelsWithoutTheLadder(t *testing.T) {
	t.Parallel()
	e, _ := levelsEnv(t)
	e.publish(t, amqp.Publishing{MessageId: "m1"})
	// A guard: the start is one dial and a few passive declares.
	ctx, cancel := context.WithTimeout(context.Background(), waitguard.For(3*time.Second))
	defer cancel()
	handled := make(chan struct{}, 1)
	err := retry.Consume(ctx, retry.DialURL(e.b.AMQPURLFor(e.vhost), amqp.Config{}), workQueue,
		func(context.Context, amqp.Delivery) error {
			select {
			case handled <- struct{}{}:
			default:
			}
			return errors.New("fails")
		}, retry.WithLogger(testLogger(t)))
	switch {
	case ctx.Err() != nil:
		t.Errorf("Consume ran until its context ended (%v); want an error at the first start", err)
	case err == nil || !strings.Contains(err.Error(), "retry.WithLevels"):
		t.Errorf("Consume: %v; want an error naming retry.WithLevels", err)
	}
	select {
	case <-handled:
		t.Error("the handler ran: Consume took a delivery it cannot retry")
	default:
	}
	if n := e.depth(t, contract.DeadLetterQueue(workQueue)); n != 0 {
		t.Errorf("the DLQ holds %d messages; a failure with retries left went there", n)
	}
	if n := e.depth(t, workQueue); n != 1 {
		t.Errorf("the work queue holds %d messages; want the one published, untouched", n)
	}
	if _, err := retry.New(e.conn, workQueue); err == nil || !strings.Contains(err.Error(), "retry.WithLevels") {
		t.Errorf("New without WithLevels on a levels queue: %v; want an error naming retry.WithLevels", err)
	}
}

// TestNewRefusesLevelsOnAQueueWithoutALadder: WithLevels on a queue whose
// retries go through shared wait queues fails, since the wait queue would
// dead-letter the copy, routed by the ladder's key, to no queue.
func TestNewRefusesLevelsOnAQueueWithoutALadder(t *testing.T) {
	t.Parallel()
	b := brokertest.Get(t)
	vhost := b.NewVhost(t)
	// The vhost has a ladder (for Delayer), which the queue does not use.
	e, ladder := specEnv(t, b, vhost, fmt.Sprintf(`version: 1
vhost: %q
layout: shared
levels: {resolution: 100ms, max: 1m}
queues:
  - {name: %s, type: quorum, retry: {delays: [1s]}}
`, vhost, workQueue))
	_, err := retry.New(e.conn, workQueue, retry.WithLevels(ladder, retry.Fixed(time.Second)))
	if err == nil || !strings.Contains(err.Error(), contract.LevelsMarker(workQueue)) {
		t.Errorf("New with WithLevels on a shared-layout queue: %v; want an error naming the missing marker", err)
	}
}
