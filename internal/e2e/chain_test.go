package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/spec"
)

// The dialects of the libraries the presets imitate, written down here
// independently of spec/presets.go so that the test notices when the
// expansion drifts from what those services publish.
const (
	// goqueue: topic exchange "{q}__retry_exchange", routing key
	// "{q}__retry.{n}", per-message expiration of ten times the delay (the
	// library's bug, which the preset's policy TTL caps); back through
	// "{q}__retry_dlx".
	goqueueRetryExchangeSuffix = "__retry_exchange"
	goqueueRetryKeyInfix       = "__retry."
	goqueueDLXSuffix           = "__retry_dlx"
	goqueueExpirationFactor    = 10
	// outbox: publish by name to "{q}.delay_{d}s" through the default
	// exchange; back with routing key {q}.
	outboxDelayInfix = ".delay_"
	// spring: headers exchange "wait" routes on wait-for (the delay in
	// milliseconds as a string, "10000"); the wait queue dead-letters into
	// the headers exchange "return",
	// which routes on return-to (the work queue).
	springWaitExchange   = "wait"
	springReturnExchange = "return"
	springWaitFor        = "wait-for"
	springReturnTo       = "return-to"
)

// chain drives one message through one work queue's retry chain, as a
// service consuming that queue would.
type chain struct {
	t          *testing.T
	x          *example
	q          spec.Queue
	id         string // the message's MessageId
	pub        *amqp.Channel
	returns    chan amqp.Return
	pubClosed  chan *amqp.Error
	cons       *amqp.Channel
	deliveries <-chan amqp.Delivery
	closed     bool
	// lastExchange and lastKey are where the last retry was published.
	lastExchange, lastKey string
}

func (x *example) newChain(t *testing.T, q spec.Queue) *chain {
	t.Helper()
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	c := &chain{t: t, x: x, q: q, id: q.Name + "#" + hex.EncodeToString(rnd[:])}
	var err error
	if c.pub, err = x.conn.Channel(); err != nil {
		t.Fatalf("open channel: %v", err)
	}
	if err := c.pub.Confirm(false); err != nil {
		t.Fatalf("confirm mode: %v", err)
	}
	c.returns = c.pub.NotifyReturn(make(chan amqp.Return, 4))
	c.pubClosed = c.pub.NotifyClose(make(chan *amqp.Error, 1))
	if c.cons, err = x.conn.Channel(); err != nil {
		t.Fatalf("open channel: %v", err)
	}
	if err := c.cons.Qos(1, 0, false); err != nil {
		t.Fatalf("qos: %v", err)
	}
	if c.deliveries, err = c.cons.Consume(q.Name, "e2e", false, false, false, false, nil); err != nil {
		t.Fatalf("consume from %q: %v", q.Name, err)
	}
	t.Cleanup(c.close)
	return c
}

// close cancels the consumer and closes both channels; a delivery not yet
// acked goes back to the work queue.
func (c *chain) close() {
	if c.closed {
		return
	}
	c.closed = true
	_ = c.cons.Cancel("e2e", false)
	_ = c.cons.Close()
	_ = c.pub.Close()
}

// publish sends the chain's message with mandatory set and waits for the
// broker's confirm. It reports whether the broker returned the message as
// unroutable.
func (c *chain) publish(exchange, key string, msg amqp.Publishing) (returned bool) {
	c.t.Helper()
	msg.MessageId = c.id
	msg.Body = []byte("e2e " + c.id)
	msg.ContentType = "text/plain"
	msg.DeliveryMode = amqp.Persistent
	// A hang guard: the confirm takes milliseconds (at most 1.2 s seen on
	// a busy machine).
	ctx, cancel := context.WithTimeout(context.Background(), waitguard.For(100*time.Millisecond))
	defer cancel()
	dc, err := c.pub.PublishWithDeferredConfirmWithContext(ctx, exchange, key, true, false, msg)
	if err != nil {
		c.t.Fatalf("publish to exchange %q, routing key %q: %v", exchange, key, err)
	}
	ok, err := dc.WaitContext(ctx)
	if err != nil {
		c.t.Fatalf("confirm of the publish to exchange %q, routing key %q: %v", exchange, key, err)
	}
	if !ok {
		select {
		case e := <-c.pubClosed:
			c.t.Fatalf("publish to exchange %q, routing key %q: channel closed: %v", exchange, key, e)
		default:
			c.t.Fatalf("publish to exchange %q, routing key %q: nacked by the broker", exchange, key)
		}
	}
	// A basic.return precedes the confirm on the channel, and the client
	// hands it over before it processes the confirm.
	select {
	case r := <-c.returns:
		if r.MessageId != c.id {
			c.t.Fatalf("returned message %q, want %q", r.MessageId, c.id)
		}
		return true
	default:
		return false
	}
}

// receive waits for the next delivery of the chain's message from the work
// queue, due delay after sent, and checks that it came no earlier; how
// late it may come is only a hang guard (see lateness).
func (c *chain) receive(delay time.Duration, sent time.Time) amqp.Delivery {
	c.t.Helper()
	lost := waitguard.For(lateness)
	timer := time.NewTimer(time.Until(sent.Add(delay + lost)))
	defer timer.Stop()
	for {
		select {
		case d, ok := <-c.deliveries:
			if !ok {
				c.t.Fatalf("the consumer of %q stopped", c.q.Name)
			}
			elapsed := time.Since(sent)
			if d.MessageId != c.id {
				c.t.Errorf("%q delivered message %q (headers %v), want only %q", c.q.Name, d.MessageId, d.Headers, c.id)
				_ = d.Ack(false)
				continue
			}
			if elapsed < delay-early {
				c.t.Errorf("delivery %s came back to %q after %v, before its delay of %v",
					attemptOf(d), c.q.Name, elapsed.Round(time.Millisecond), delay)
			}
			return d
		case <-timer.C:
			now := c.x.depths(c.t)
			where := fmt.Sprintf("messages per queue now: %v", now)
			if len(now) == 0 {
				where = "the vhost holds no message: the broker dropped it (a dead-letter cycle, or unroutable)"
			}
			c.t.Fatalf("the message did not come back to %q within %v of its delay %v; %s", c.q.Name, lost, delay, where)
		}
	}
}

func attemptOf(d amqp.Delivery) string {
	return fmt.Sprintf("%s=%v", contract.HeaderAttempt, d.Headers[contract.HeaderAttempt])
}

// route is how a delivery reached the work queue: the delivery's exchange
// and routing key, and, when it waited in a wait queue, the one x-death
// entry that waiting left.
type route struct {
	Exchange, RoutingKey string
	Death                *death
}

func routeOf(d amqp.Delivery) route {
	r := route{Exchange: d.Exchange, RoutingKey: d.RoutingKey}
	if dd, ok := firstDeath(d.Headers); ok {
		r.Death = &dd
	}
	return r
}

// wantRoute is the route by which delivery k (0 is the first) must come:
// straight from the test's publish, back from the retry exchange at once
// (an immediate retry), or expired out of the wait queue step.Via.
func (c *chain) wantRoute(k int, step spec.Step) route {
	q := c.q.Name
	switch {
	case k == 0:
		return route{Exchange: "", RoutingKey: q}
	case step.Via == q: // lastKey: q, or through a ladder, a delay of 0 and q
		return route{Exchange: contract.RetryExchange(q), RoutingKey: c.lastKey}
	}
	if l, ok := c.x.levels(c.q); ok {
		return c.levelsRoute(l, step)
	}
	waited := &death{Queue: step.Via, Reason: "expired", Exchange: c.lastExchange,
		RoutingKeys: []string{c.lastKey}, Count: 1, Entries: 1}
	switch c.q.Preset {
	case spec.PresetGoQueue:
		return route{Exchange: q + goqueueDLXSuffix, RoutingKey: c.lastKey, Death: waited}
	case spec.PresetSpring:
		return route{Exchange: springReturnExchange, RoutingKey: c.lastKey, Death: waited}
	default: // native (both layouts) and outbox dead-letter through "" with key q
		return route{Exchange: "", RoutingKey: q, Death: waited}
	}
}

// retry republishes delivery d as retry number n, due after delay, in the
// dialect of the queue's service, then acks d. It returns the time just
// before the publish, from which the delay runs.
func (c *chain) retry(d amqp.Delivery, n int, delay time.Duration) time.Time {
	c.t.Helper()
	msg := amqp.Publishing{Headers: republishHeaders(d, n+1)}
	q := c.q.Name
	var exchange, key string
	switch c.q.Preset {
	case spec.PresetNone:
		exchange, key = contract.RetryExchange(q), c.x.nativeRetryKey(c.t, c.q, delay)
	case spec.PresetGoQueue:
		exchange, key = q+goqueueRetryExchangeSuffix, q+goqueueRetryKeyInfix+strconv.Itoa(n)
		msg.Expiration = strconv.FormatInt(goqueueExpirationFactor*delay.Milliseconds(), 10)
	case spec.PresetOutbox:
		exchange, key = "", q+outboxDelayInfix+strconv.FormatInt(int64(delay/time.Second), 10)+"s"
	case spec.PresetSpring:
		exchange, key = springWaitExchange, ""
		msg.Headers[springWaitFor] = strconv.FormatInt(delay.Milliseconds(), 10)
		msg.Headers[springReturnTo] = q
	default:
		c.t.Fatalf("queue %q: preset %q has no driver in this test", q, c.q.Preset)
	}
	c.lastExchange, c.lastKey = exchange, key
	sent := time.Now()
	if c.publish(exchange, key, msg) {
		c.t.Fatalf("retry %d of %q (exchange %q, routing key %q, delay %v) was returned unroutable",
			n, q, exchange, key, delay)
	}
	if err := d.Ack(false); err != nil {
		c.t.Fatalf("ack: %v", err)
	}
	return sent
}

// republishHeaders are d's headers without the broker's death bookkeeping
// (see package contract on cycles), with the attempt counter set to
// attempt (2 for the first retry). The preset services keep counters of
// their own; the test reuses the contract's header to follow the message.
func republishHeaders(d amqp.Delivery, attempt int) amqp.Table {
	h := amqp.Table{}
	for k, v := range d.Headers {
		if !contract.DeathHeaders(k) {
			h[k] = v
		}
	}
	h[contract.HeaderAttempt] = contract.AttemptValue(attempt)
	return h
}

// giveUp fails delivery d for good, after its last attempt: a native
// service republishes it as retry n, which no binding routes, so the broker
// returns the mandatory copy, and the service sends d to the DLX with
// reason exhausted (package retry's way; a queue without DLQ has no DLX);
// a preset's service rejects it, and the work queue dead-letters it.
func (c *chain) giveUp(d amqp.Delivery, n int) {
	c.t.Helper()
	q := c.q.Name
	if c.q.Preset != spec.PresetNone {
		if err := d.Reject(false); err != nil {
			c.t.Fatalf("reject: %v", err)
		}
		return
	}
	exchange := contract.RetryExchange(q)
	if !c.publish(exchange, q, amqp.Publishing{Headers: republishHeaders(d, n+1)}) {
		c.t.Errorf("retry %d of %q, past the last attempt, was routed somewhere instead of returned", n, q)
	}
	if c.q.DLQ {
		h := republishHeaders(d, n)
		h[contract.HeaderDeadLetterReason] = contract.ReasonExhausted
		if c.publish(contract.DeadLetterExchange(q), q, amqp.Publishing{Headers: h}) {
			c.t.Errorf("the exhausted message %q was returned by %s", c.id, contract.DeadLetterExchange(q))
		}
	}
	if err := d.Ack(false); err != nil {
		c.t.Fatalf("ack: %v", err)
	}
}

// driveChain publishes one message to q and fails every delivery of it,
// checking that each retry comes back to q through the scheduled wait queue
// after its delay, and that after the last attempt exactly one copy of the
// message is left in the vhost: in q's DLQ.
func (x *example) driveChain(t *testing.T, q spec.Queue) {
	if !x.expectDepths(t, nil, "before the chain") {
		x.purge(t)
		t.FailNow()
	}
	steps := x.file.Spec.Schedule(q)
	total := len(steps) - 1
	x.checkWaitQueues(t, q, steps)
	c := x.newChain(t, q)
	defer x.cleanUpAfter(t, c)
	sent := time.Now()
	if c.publish("", q.Name, amqp.Publishing{}) {
		t.Fatalf("the first publish to %q was returned unroutable", q.Name)
	}
	for k := 0; k <= total; k++ {
		d := c.receive(steps[k].Delay, sent)
		if got, ok := contract.ParseAttempt(d.Headers[contract.HeaderAttempt]); !ok || got != steps[k].Attempt {
			t.Errorf("delivery %d of %q carries %s, want attempt %d", k+1, q.Name, attemptOf(d), steps[k].Attempt)
		}
		if diff := cmp.Diff(c.wantRoute(k, steps[k]), routeOf(d)); diff != "" {
			t.Errorf("delivery %d of %q (attempt %d, scheduled via %s) came by another route (-want +got):\n%s",
				k+1, q.Name, k, steps[k].Via, diff)
		}
		if k < total {
			sent = c.retry(d, k+1, steps[k+1].Delay)
		} else {
			c.giveUp(d, k+1)
		}
	}
	c.close()

	dlq := contract.DeadLetterQueue(q.Name)
	want := map[string]int{}
	if q.DLQ {
		want[dlq] = 1
	}
	if !x.expectDepths(t, want, fmt.Sprintf("after the last of %d attempts", total+1)) || !q.DLQ {
		return
	}
	m, ok := x.getOne(t, dlq)
	if !ok {
		return
	}
	if m.MessageId != c.id {
		t.Errorf("%s holds message %q, want %q", dlq, m.MessageId, c.id)
	}
	if q.Preset == spec.PresetNone {
		// Sent by the service through the DLX once the retry exchange
		// returned it: no dead-lettering, so no x-death, and the attempt of
		// the last delivery.
		want := route{Exchange: contract.DeadLetterExchange(q.Name), RoutingKey: q.Name}
		if diff := cmp.Diff(want, routeOf(m)); diff != "" {
			t.Errorf("the message reached %s by another route (-want +got):\n%s", dlq, diff)
		}
		if got, _ := contract.ParseAttempt(m.Headers[contract.HeaderAttempt]); got != total+1 {
			t.Errorf("the message in %s carries %s, want attempt %d", dlq, attemptOf(m), total+1)
		}
		if r := m.Headers[contract.HeaderDeadLetterReason]; r != contract.ReasonExhausted {
			t.Errorf("the message in %s carries reason %v, want %s", dlq, r, contract.ReasonExhausted)
		}
		return
	}
	// Rejected by the preset's service: dead-lettered by the work queue.
	got, _ := firstDeath(m.Headers)
	if diff := cmp.Diff(death{Queue: q.Name, Reason: "rejected"}, death{Queue: got.Queue, Reason: got.Reason}); diff != "" {
		t.Errorf("latest x-death of the message in %s (-want +got):\n%s", dlq, diff)
	}
}

// cleanUpAfter closes c, so that a delivery left unacked by a failure goes
// back to its queue, and then, if the test failed, empties the vhost for
// the next test.
func (x *example) cleanUpAfter(t *testing.T, c *chain) {
	c.close()
	if t.Failed() {
		x.purge(t)
	}
}

// checkWaitQueues checks that every wait queue of q's schedule exists on
// the broker with the TTL of the delay it is scheduled for; goqueue's retry
// queues have none (the service sets a per-message expiration).
func (x *example) checkWaitQueues(t *testing.T, q spec.Queue, steps []spec.Step) {
	t.Helper()
	if l, ok := x.levels(q); ok {
		x.checkLadder(t, l)
		return
	}
	for _, s := range steps[1:] {
		if s.Via == q.Name {
			continue // an immediate retry
		}
		live, ok := x.live.Queue(x.vhost, s.Via)
		if !ok {
			t.Errorf("the wait queue %s of retry %d of %q is not on the broker", s.Via, s.Attempt-1, q.Name)
			continue
		}
		var want any = s.Delay.Milliseconds()
		if q.Preset == spec.PresetGoQueue {
			want = nil
		}
		if diff := cmp.Diff(want, live.Arguments["x-message-ttl"]); diff != "" {
			t.Errorf("x-message-ttl of %s, the wait queue of retry %d (%v) of %q (-want +got):\n%s",
				s.Via, s.Attempt-1, s.Delay, q.Name, diff)
		}
	}
}
