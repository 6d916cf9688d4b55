package retry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/retry"
)

// TestNativeSurvivesNodeRestart: retries that a native queue holds
// survive a crash of the node (SIGKILL, then a start on the same data),
// on both routes: every message that failed once comes back once, none
// before its delay, and is acked; none is lost or dead-lettered. The
// delay is long enough that a retry the broker forgot to hold would come
// back at the restart, early; the test says so when the restart itself
// took longer.
func TestNativeSurvivesNodeRestart(t *testing.T) {
	t.Parallel()
	if !nativeBroker(brokertest.Get(t).Version(t)) {
		t.Skipf("the native layout needs RabbitMQ %s (RMQTOPO_TEST_RABBITMQ=4.3)", nativeSince)
	}
	// A guard on starting the node and on its restart: seconds on a
	// quiet machine, 20 s seen at a load of 20 on 2 CPUs.
	ctx, cancel := context.WithTimeout(context.Background(), waitguard.For(60*time.Second))
	defer cancel()
	node, b := ownNode(t, ctx, "rmqtopo-nrestart")
	const delay = 30 * time.Second
	routes := map[string][]time.Duration{
		"reject":   {delay},            // fixed: the queue's own x-delayed-retry-*
		"modified": {delay, 3 * delay}, // not linear: x-opt-delivery-time per message
	}
	runs := map[string]*restartRun{}
	for name, delays := range routes {
		if _, _, expressible := contract.BrokerExpressible(delays); expressible != (name == "reject") {
			t.Fatalf("%s: schedule %v is on the wrong route", name, delays)
		}
		runs[name] = startRestartRun(t, nativeEnvOn(t, b, delays, false), 40)
	}
	for name, r := range runs {
		r.waitHeld(t, name)
	}
	start := time.Now()
	node.Kill()
	if err := node.Restart(ctx); err != nil {
		t.Fatalf("restarting the node: %v", err)
	}
	took := time.Since(start)
	t.Logf("node killed and started again in %v", took.Round(time.Millisecond))
	for name, r := range runs {
		r.check(t, name, delay, took)
	}
}

// restartRun is one route's messages in TestNativeSurvivesNodeRestart.
type restartRun struct {
	e   *env
	n   int
	arr *arrivals
	c   *consumer
}

// startRestartRun publishes n messages to e's native queue and consumes
// them, each failing once, until every one is held for its retry; then
// stops consuming.
func startRestartRun(t *testing.T, e *env, n int) *restartRun {
	r := &restartRun{e: e, n: n, arr: newArrivals()}
	r.c = startConsume(t, e, func(_ context.Context, d amqp.Delivery) error {
		if r.arr.add(d.MessageId) == 1 {
			return errors.New("fails once")
		}
		return nil
	}, retry.WithPrefetch(4))
	var msgs []amqp.Publishing
	for i := range n {
		msgs = append(msgs, amqp.Publishing{MessageId: fmt.Sprintf("m%d", i), DeliveryMode: amqp.Persistent})
	}
	e.publishMany(t, "", workQueue, msgs)
	r.c.obs.waitFor(t, waitguard.For(10*time.Second), "every message retried", func(all []retry.Settlement) bool {
		return count2(all, func(s retry.Settlement) bool { return s.Outcome == retry.Retried }) == n
	})
	r.c.stop(t)
	return r
}

// waitHeld waits until the broker reports every message of the run held
// back (messages_delayed, RabbitMQ 4.3), so that the crash meets them
// there and not on their way.
func (r *restartRun) waitHeld(t *testing.T, name string) {
	t.Helper()
	path := r.e.b.MgmtURL + "/api/queues/" + url.PathEscape(r.e.vhost) + "/" + url.PathEscape(workQueue)
	var got struct {
		Delayed *int `json:"messages_delayed"`
	}
	// A guard: the statistics refresh every 5 s on this node.
	for deadline := waitguard.Deadline(15 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		req, _ := http.NewRequest(http.MethodGet, path, nil)
		req.SetBasicAuth(r.e.b.User, r.e.b.Password)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(res.Body).Decode(&got)
		res.Body.Close()
		if err == nil && got.Delayed != nil && *got.Delayed == r.n {
			return
		}
	}
	t.Fatalf("%s: the broker never showed %d messages delayed (last: %v)", name, r.n, got.Delayed)
}

// check consumes again after the restart and checks that every message
// came back once, not before its delay, and was acked.
func (r *restartRun) check(t *testing.T, name string, delay, restart time.Duration) {
	t.Helper()
	c := startConsume(t, r.e, func(_ context.Context, d amqp.Delivery) error {
		r.arr.add(d.MessageId)
		return nil
	}, retry.WithPrefetch(4))
	c.obs.waitFor(t, waitguard.For(delay+10*time.Second), fmt.Sprintf("%s: every message acked", name), func(all []retry.Settlement) bool {
		return count2(all, func(s retry.Settlement) bool { return s.Outcome == retry.Acked }) == r.n
	})
	if restart >= delay {
		t.Logf("%s: the restart took %v, longer than the delay %v: a retry not held through it would not be early", name, restart, delay)
	}
	for i := range r.n {
		id := fmt.Sprintf("m%d", i)
		at := r.arr.of(id)
		if len(at) != 2 {
			t.Errorf("%s: %s was handled %d times; want twice", name, id, len(at))
			continue
		}
		if gap := at[1].Sub(at[0]); gap < delay {
			t.Errorf("%s: %s came back after %v, before its delay %v", name, id, gap.Round(time.Millisecond), delay)
		}
	}
	if d := r.e.depth(t, contract.DeadLetterQueue(workQueue)); d != 0 {
		t.Errorf("%s: the DLQ holds %d messages; each failed only once", name, d)
	}
}
