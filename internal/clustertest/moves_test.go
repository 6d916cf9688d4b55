package clustertest

import (
	"bytes"
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
)

// The helpers of the tests that kill a node while `rmqtopo dlq replay` or
// `dlq sweep` moves messages.

// fill publishes messages "0".."n-1" to queue, persistent and confirmed,
// each with the headers headers(id).
func fill(t *testing.T, conn *amqp.Connection, queue string, n int, headers func(id int) amqp.Table) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	// A hang guard of 2 minutes (unscaled) as before: 5,000 confirmed
	// publishes take 1-1.6 s at load 28.
	ctx, cancel := context.WithTimeout(context.Background(), waitguard.AtLeast(2*time.Second, 2*time.Minute))
	defer cancel()
	var pending []*amqp.DeferredConfirmation
	for i := 0; i < n; i++ {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, amqp.Publishing{
			DeliveryMode: amqp.Persistent, Body: []byte(strconv.Itoa(i)), Headers: headers(i)})
		if err != nil {
			t.Fatal(err)
		}
		pending = append(pending, dc)
	}
	for i, dc := range pending {
		if ok, err := dc.WaitContext(ctx); !ok || err != nil {
			t.Fatalf("message %d not confirmed: %v", i, err)
		}
	}
}

// mustLead fails the test unless victim's node leads every one of the
// quorum queues, as seen through b.
func mustLead(t *testing.T, b, victim *brokertest.Broker, vhost string, queues ...string) {
	t.Helper()
	for _, q := range queues {
		if l := queue(t, b, vhost, q).Leader; l != victim.Node.Name {
			t.Fatalf("queue %q is led by %s, not by %s through which it was declared", q, l, victim.Node.Name)
		}
	}
}

// killMidway runs rmqtopo with args and kills victim's node with SIGKILL
// once moved() reaches at, then waits for the run to end. It returns the
// run's combined output and error. A run that ends before moved() reaches
// at is logged, and nothing is killed.
func killMidway(t *testing.T, args []string, victim *brokertest.Broker, moved func() int, at int) (string, error) {
	t.Helper()
	cmd := exec.Command(cli(t), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case err := <-done:
			t.Logf("the run ended before the kill (%v)", err)
			return out.String(), err
		case <-time.After(50 * time.Millisecond):
		}
		if n := moved(); n >= at {
			victim.Node.Kill()
			t.Logf("killed %s with %d messages moved", victim.Node.Name, n)
			// A guard: the run fails at its next frame to the lost node,
			// or finishes its moves through another, within seconds.
			select {
			case err := <-done:
				return out.String(), err
			case <-time.After(waitguard.For(5 * time.Second)):
				_ = cmd.Process.Kill()
				<-done // the output is complete once Wait returns
				t.Fatalf("rmqtopo %v still running after the node's kill; its output:\n%s", args, out.String())
			}
		}
	}
}

// rerun runs rmqtopo with args, logging each run, until done says the
// job is finished (last is nil before the first run); it fails the test
// after 5 runs.
func rerun(t *testing.T, args []string, done func(last *result) bool) {
	t.Helper()
	var last *result
	for i := 0; !done(last); i++ {
		if i == 5 {
			t.Fatalf("not done after 5 re-runs; the last one: %s", last)
		}
		r := run(t, args...)
		t.Logf("re-run %d: %s", i+1, r)
		last = &r
	}
}

// drainIDs drains queue and counts its messages by id (their body); each,
// if not nil, sees every message.
func drainIDs(t *testing.T, b *brokertest.Broker, vhost, queue string, each func(id int, d *amqp.Delivery)) map[int]int {
	t.Helper()
	seen := map[int]int{}
	conn := b.Dial(t, vhost)
	defer conn.Close()
	// A guard of a minute (unscaled) as before: 5,000 messages drain in
	// half a second at load 28.
	for _, d := range brokertest.Drain(t, conn, queue, b.QueueDepth(t, vhost, queue), waitguard.AtLeast(time.Second, time.Minute)) {
		id, err := strconv.Atoi(string(d.Body))
		if err != nil {
			t.Errorf("queue %q holds a message that is not one of the test's: %q", queue, d.Body)
			continue
		}
		seen[id]++
		if each != nil {
			each(id, &d)
		}
	}
	return seen
}

// firstIDs renders up to 10 ids for an error message.
func firstIDs(ids []int) string {
	var s []string
	for _, id := range ids[:min(len(ids), 10)] {
		s = append(s, strconv.Itoa(id))
	}
	return strings.Join(s, " ")
}
