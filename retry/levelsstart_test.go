package retry_test

import (
	"context"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
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
