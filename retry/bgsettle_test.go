package retry_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rabbithole "github.com/michaelklishin/rabbit-hole/v2"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/retry"
)

// TestConsumeServesWhileACopyAwaitsItsConfirm: Consume settles a failed
// delivery (its copy published and confirmed, then the original acked) in
// the background, so its one handler serves a retry due in the return
// queue while the broker still refuses the other delivery's copy (its wait
// queue is full, overflow reject-publish: every publish of the copy is
// nacked). The refused copy is held, not lost: once the broker takes it
// the retry goes on as scheduled. With settling in the handler, the
// return queue's delivery would wait for the whole confirm timeout.
func TestConsumeServesWhileACopyAwaitsItsConfirm(t *testing.T) {
	t.Parallel()
	e := newEnv(t, topo{layout: "per-attempt", queueType: "classic", delays: []string{"100ms"}, returnQueue: true}, nil)
	mgmt := e.b.Mgmt(t)
	// With a return queue, the per-attempt wait queues are named after it.
	wait := contract.PerAttemptWaitQueue(contract.ReturnQueue(workQueue), 1, 100*time.Millisecond)
	putPolicy(t, mgmt, e.vhost, "full", "^"+regexp.QuoteMeta(wait)+"$",
		rabbithole.PolicyDefinition{"max-length": 0, "overflow": "reject-publish"})

	failed := make(chan struct{})
	c := startConsume(t, e, func(_ context.Context, d amqp.Delivery) error {
		if n, _ := retry.Attempt(d); d.MessageId == "slow" && n == 1 {
			close(failed)
			return errors.New("first attempt fails")
		}
		return nil
	}, retry.WithPrefetch(1),
		// Far past the guards below: the copy is refused until the test
		// lets the wait queue take it, and must not be given up on.
		retry.WithConfirmTimeout(waitguard.For(time.Minute)))

	e.publish(t, amqp.Publishing{MessageId: "slow", Body: []byte("x")})
	select {
	case <-failed:
	case <-time.After(waitguard.For(100 * time.Millisecond)): // a first delivery: milliseconds
		t.Fatal("the first delivery never reached the handler")
	}
	brokertest.PublishConfirmed(t, e.conn, "", contract.ReturnQueue(workQueue), amqp.Publishing{MessageId: "due", Body: []byte("y")})

	isAck := func(id string, attempt int) func([]retry.Settlement) bool {
		return func(all []retry.Settlement) bool {
			for _, s := range all {
				if s.MessageID == id && s.Attempt == attempt && s.Outcome == retry.Acked {
					return true
				}
			}
			return false
		}
	}
	// A guard: the one handler is free at once, the delivery takes
	// milliseconds.
	all := c.obs.waitFor(t, waitguard.For(100*time.Millisecond), "the return queue's delivery acked", isAck("due", 1))
	for _, s := range all {
		if s.MessageID == "slow" {
			t.Fatalf("%q settled (%v) while the broker refused its copy", s.MessageID, s.Outcome)
		}
	}

	res, err := mgmt.DeletePolicy(e.vhost, "full")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	// A guard: the copy's next publish (pauses up to 1 s), then its 0.1 s
	// delay. The retry's own settlement is reported by the goroutine that
	// settled it, which a busy machine may run after the retry came back
	// and was acked: wait for both, in any order.
	settledSlow := func(all []retry.Settlement) bool {
		n := 0
		for _, s := range all {
			if s.MessageID == "slow" {
				n++
			}
		}
		return n >= 2
	}
	all = c.obs.waitFor(t, waitguard.For(2*time.Second), "the retry and its ack", settledSlow)
	var got []string
	for _, s := range all {
		got = append(got, fmt.Sprintf("%s/%d/%s", s.MessageID, s.Attempt, s.Outcome))
	}
	slices.Sort(got)
	if diff := cmp.Diff([]string{"due/1/ack", "slow/1/retry", "slow/2/ack"}, got); diff != "" {
		t.Errorf("settlements (-want +got):\n%s", diff)
	}
}
