package clustertest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/retry"
)

// helperStorm returns the workers of TestRetryStormNodeLoss's "helper"
// storm, the ones a service would run: retry.Consume, with its defaults
// but for a short reconnection backoff, each dialling the cluster's nodes
// in turn; and report, which logs the helper's settlements once the storm
// is counted. The same storm, kills and counts as the "contract" one:
// every message ends handled or in the DLQ, none lost, duplicates
// counted; retries held during the leader kill arrive within lateBound.
// The handler counts its successes itself: a success whose ack was lost
// with its node is handled again, a duplicate.
func helperStorm(t *testing.T) (work func(ctx context.Context, s *storm, i int), report func(t *testing.T, s *storm)) {
	obs := &stormObserver{}
	work = func(ctx context.Context, st *storm, i int) {
		dial := rotatingDialer(st, i)
		logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
		err := retry.Consume(ctx, dial, stormQueue, st.helperHandler, retry.WithPrefetch(10),
			retry.WithReconnectBackoff(50*time.Millisecond, time.Second),
			retry.WithObserver(obs), retry.WithObserver(stormSettlements{st}), retry.WithLogger(logger))
		if err != nil {
			t.Errorf("worker %d: Consume: %v", i, err)
		}
	}
	report = func(t *testing.T, s *storm) {
		// Each retried or requeued delivery published one copy, each
		// exhausted one two (the returned retry, then the DLQ copy); the
		// rest are copies published again after a broker nack.
		again := obs.publishes.Load() - obs.outcomes[retry.Retried].Load() - 2*obs.outcomes[retry.DeadLettered].Load() - obs.outcomes[retry.Requeued].Load()
		t.Logf("helper settlements: %d acked, %d retried, %d dead-lettered, %d requeued (a copy nacked past the confirm timeout or unconfirmed, or the shutdown); "+
			"%d with a settling error; handler ran %d times; %d copies published, about %d of them again after a broker nack",
			obs.outcomes[retry.Acked].Load(), obs.outcomes[retry.Retried].Load(), obs.outcomes[retry.DeadLettered].Load(),
			obs.outcomes[retry.Requeued].Load(), obs.errs.Load(), s.progress.Load(), obs.publishes.Load(), again)
	}
	return work, report
}

// helperHandler is the storm's handler under retry.Consume: it fails by
// the message's fate and counts its successes.
func (s *storm) helperHandler(_ context.Context, d amqp.Delivery) error {
	id, err := strconv.Atoi(string(d.Body))
	if err != nil {
		return retry.Permanent(fmt.Errorf("not a message of the storm: %q", d.Body))
	}
	attempt, _ := retry.Attempt(d)
	s.noteArrival(id, attempt)
	if !succeeds(id, attempt) {
		return errors.New("failing on purpose")
	}
	s.noteHandled(id)
	return nil
}

// stormSettlements records, for the storm's lateness measure, when each
// retry was confirmed: the helper reports a Retried settlement once the
// broker confirmed the copy (and it acked, or tried to ack, the
// original), just before the copy can expire from its wait queue.
type stormSettlements struct{ s *storm }

func (o stormSettlements) Retried(string, int)         {}
func (o stormSettlements) DeadLettered(string, string) {}
func (o stormSettlements) ConfirmsPending(string, int) {}
func (o stormSettlements) Connected(string, bool)      {}
func (o stormSettlements) Settled(st retry.Settlement) {
	if st.Outcome != retry.Retried {
		return
	}
	if id, err := strconv.Atoi(st.MessageID); err == nil {
		o.s.noteRetried(id, st.Attempt+1)
	}
}

// stormObserver counts the helper's settlements by outcome.
type stormObserver struct {
	retry.NopObserver
	outcomes  [retry.Requeued + 1]atomic.Int64
	errs      atomic.Int64
	publishes atomic.Int64 // copies published, each publish of one again too
}

func (o *stormObserver) ConfirmsPending(_ string, delta int) {
	if delta > 0 {
		o.publishes.Add(1)
	}
}

func (o *stormObserver) Settled(s retry.Settlement) {
	o.outcomes[s.Outcome].Add(1)
	if s.Err != nil {
		o.errs.Add(1)
	}
}

// rotatingDialer is worker i's retry.Dialer: retry.DialURLs over the
// cluster's nodes, starting at node i so that the workers spread, each
// call after the first counted as a redial.
func rotatingDialer(s *storm, i int) retry.Dialer {
	urls := append(slices.Clone(s.urls[i%len(s.urls):]), s.urls[:i%len(s.urls)]...)
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(fmt.Sprintf("storm-helper-%d", i))
	dial := retry.DialURLs(urls, amqp.Config{Heartbeat: 5 * time.Second, Dial: amqp.DefaultDial(3 * time.Second), Properties: props})
	var calls atomic.Int64
	return func(ctx context.Context) (*amqp.Connection, error) {
		if calls.Add(1) > 1 {
			s.redials.Add(1)
		}
		return dial(ctx)
	}
}
