package clustertest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
)

// The storm's workers and publisher are raw amqp091 clients that act per
// package contract, not the retry package: a failed delivery is
// republished, mandatory and confirmed, to the queue's retry exchange with
// the next attempt number (or, returned past the schedule, to the DLX as
// exhausted), and only then acked; a publish the broker nacks or
// leaves unconfirmed is retried after a pause; a connection lost is
// re-made to the next node. So what TestRetryStormNodeLoss measures is the
// broker's and the topology's behaviour under node loss, not one client
// library's; TestRetryStormNodeLossHelper runs the same storm with
// retry.Consume as the workers.

// stormQueue is the work queue of the storm spec; its schedule is
// stormDelays, then the DLQ.
const stormQueue = "storm"

var stormDelays = []time.Duration{time.Second, 2 * time.Second}

// Message fates by id: a tenth fail at every attempt and end in the DLQ,
// three tenths fail once and succeed on their first retry, the rest
// succeed at once.
func alwaysFails(id int) bool { return id%10 == 0 }
func failsOnce(id int) bool   { return id%10 >= 1 && id%10 <= 3 }

// succeeds reports whether the handler succeeds on id at attempt.
func succeeds(id, attempt int) bool {
	return !alwaysFails(id) && !(failsOnce(id) && attempt == contract.FirstAttempt)
}

// storm is the shared state of one fault run.
type storm struct {
	urls []string // AMQP URLs of the vhost on every node

	mu       sync.Mutex
	handled  map[int]int          // id → acks after success
	retried  map[[2]int]time.Time // (id, attempt) → confirmed retry publish
	late     time.Duration        // worst arrival after retry time + delay
	lateAt   [2]int               // its (id, attempt)
	arrivals map[[2]int]int       // (id, attempt) → deliveries, for duplicates
	events   []string             // kills and restarts, for the log
	progress atomic.Int64         // deliveries handled, any outcome
	nacks    atomic.Int64         // publishes nacked or unconfirmed
	redials  atomic.Int64         // connections re-made
	pubDone  atomic.Bool          // every first publish confirmed
	first    map[int]bool         // ids whose first publish was confirmed
}

func newStorm(urls []string) *storm {
	return &storm{urls: urls, handled: map[int]int{}, retried: map[[2]int]time.Time{},
		arrivals: map[[2]int]int{}, first: map[int]bool{}}
}

// dial connects to node i (mod the node count), trying the next node
// until one answers or ctx ends. The dial timeout and heartbeat are the
// clients' protocol, not guards: a dial that times out tries the next
// node, a missed heartbeat makes the client re-dial, and neither fails
// the test.
func (s *storm) dial(ctx context.Context, i int) (*amqp.Connection, int, error) {
	for {
		for j := 0; j < len(s.urls); j++ {
			n := (i + j) % len(s.urls)
			conn, err := amqp.DialConfig(s.urls[n], amqp.Config{Heartbeat: 5 * time.Second, Dial: amqp.DefaultDial(3 * time.Second)})
			if err == nil {
				return conn, n, nil
			}
		}
		if err := pause(ctx, 500*time.Millisecond); err != nil {
			return nil, 0, err
		}
	}
}

func pause(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// publishConfirmed publishes msg until the broker acks it: a nack or a
// confirm that does not come within 10s is retried after a pause; a
// closed channel is an error (the caller re-dials). The 10 s is the
// storm's protocol, a client's confirm timeout, not a guard: a publish
// given up on is published again (a duplicate the storm counts, never a
// failure), and only the storms' guard (runStormsNodeLoss) ends the test. With returns (ch's
// return listener, buffered) the publish is mandatory, and returned says
// whether the broker returned it as unroutable before acking it.
func (s *storm) publishConfirmed(ctx context.Context, ch *amqp.Channel, returns <-chan amqp.Return, exchange, key string, msg amqp.Publishing) (returned bool, err error) {
	for {
		for len(returns) > 0 {
			<-returns // a stale return of a publish given up on
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		dc, err := ch.PublishWithDeferredConfirmWithContext(cctx, exchange, key, returns != nil, false, msg)
		if err == nil {
			var ok bool
			ok, err = dc.WaitContext(cctx)
			if err == nil && ok {
				cancel()
				// A return precedes its ack, and the reader hands it over
				// before it resolves the confirm.
				return len(returns) > 0, nil
			}
		}
		cancel()
		if ch.IsClosed() || ctx.Err() != nil {
			return false, fmt.Errorf("publish: channel closed: %v", err)
		}
		s.nacks.Add(1)
		if err := pause(ctx, 200*time.Millisecond); err != nil {
			return false, err
		}
	}
}

// publish sends messages 0..n-1 to the work queue at about rate a second
// from 4 publishers, each message until confirmed, each publisher
// re-dialling through other nodes when its node dies.
func (s *storm) publish(ctx context.Context, n, rate int) error {
	const publishers = 4
	errs := make(chan error, publishers)
	for k := 0; k < publishers; k++ {
		go func() { errs <- s.publishEvery(ctx, k, publishers, n, rate/publishers) }()
	}
	var first error
	for k := 0; k < publishers; k++ {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first == nil {
		s.pubDone.Store(true)
	}
	return first
}

// publishEvery publishes the ids from..n-1 step apart, rate a second.
func (s *storm) publishEvery(ctx context.Context, from, step, n, rate int) error {
	next := from
	tick := time.NewTicker(time.Second / time.Duration(max(rate, 1)))
	defer tick.Stop()
	for attempt := from; next < n; attempt++ {
		conn, _, err := s.dial(ctx, attempt)
		if err != nil {
			return err
		}
		ch, err := conn.Channel()
		if err == nil {
			err = ch.Confirm(false)
		}
		for err == nil && next < n {
			<-tick.C
			_, err = s.publishConfirmed(ctx, ch, nil, "", stormQueue, amqp.Publishing{DeliveryMode: amqp.Persistent,
				MessageId: strconv.Itoa(next), Headers: amqp.Table{"id": strconv.Itoa(next)}, Body: []byte(strconv.Itoa(next))})
			if err == nil {
				s.mu.Lock()
				s.first[next] = true
				s.mu.Unlock()
				next += step
			}
		}
		conn.Close()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.redials.Add(1)
	}
	return nil
}

// work consumes from the work queue through node i until ctx ends,
// re-dialling through the other nodes when its connection is lost.
func (s *storm) work(ctx context.Context, i int) {
	for ctx.Err() == nil {
		conn, _, err := s.dial(ctx, i)
		if err != nil {
			return
		}
		err = s.consume(ctx, conn)
		conn.Close()
		if ctx.Err() == nil && err != nil {
			s.redials.Add(1)
		}
	}
}

func (s *storm) consume(ctx context.Context, conn *amqp.Connection) error {
	pub, err := conn.Channel()
	if err == nil {
		err = pub.Confirm(false)
	}
	if err != nil {
		return err
	}
	returns := pub.NotifyReturn(make(chan amqp.Return, 1))
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Qos(20, 0, false)
	}
	var deliveries <-chan amqp.Delivery
	if err == nil {
		deliveries, err = ch.Consume(stormQueue, "", false, false, false, false, nil)
	}
	if err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case d, ok := <-deliveries:
			if !ok {
				return errors.New("deliveries closed")
			}
			if err := s.handle(ctx, pub, returns, d); err != nil {
				return err
			}
		}
	}
}

// handle is the contract's worker: succeed and ack, or republish to the
// retry exchange with the next attempt, confirmed, then ack; a copy the
// retry exchange returns (past the schedule) goes to the DLX instead.
func (s *storm) handle(ctx context.Context, pub *amqp.Channel, returns <-chan amqp.Return, d amqp.Delivery) error {
	id, _ := strconv.Atoi(string(d.Body))
	attempt, _ := contract.ParseAttempt(d.Headers[contract.HeaderAttempt]) // 1: a first delivery
	s.noteArrival(id, attempt)
	if succeeds(id, attempt) {
		if err := d.Ack(false); err != nil {
			return err
		}
		s.noteHandled(id)
		return nil
	}
	next := attempt + 1
	returned, err := s.publishConfirmed(ctx, pub, returns, contract.RetryExchange(stormQueue), stormQueue, amqp.Publishing{
		DeliveryMode: amqp.Persistent, Body: d.Body,
		Headers: amqp.Table{contract.HeaderAttempt: contract.AttemptValue(next), "id": strconv.Itoa(id)}})
	if err != nil {
		return err // unacked: the broker redelivers it
	}
	if returned {
		_, err := s.publishConfirmed(ctx, pub, nil, contract.DeadLetterExchange(stormQueue), stormQueue, amqp.Publishing{
			DeliveryMode: amqp.Persistent, Body: d.Body,
			Headers: amqp.Table{contract.HeaderAttempt: contract.AttemptValue(attempt), "id": strconv.Itoa(id),
				contract.HeaderDeadLetterReason: contract.ReasonExhausted}})
		if err != nil {
			return err
		}
		return d.Ack(false)
	}
	s.noteRetried(id, next)
	return d.Ack(false)
}

// noteHandled counts a success of id.
func (s *storm) noteHandled(id int) {
	s.mu.Lock()
	s.handled[id]++
	s.mu.Unlock()
}

// noteRetried records when the retry of id as attempt next was first
// confirmed, for how late it then arrives.
func (s *storm) noteRetried(id, next int) {
	s.mu.Lock()
	if _, ok := s.retried[[2]int{id, next}]; !ok {
		s.retried[[2]int{id, next}] = time.Now()
	}
	s.mu.Unlock()
}

// noteArrival counts a delivery of (id, attempt) and, for a retry, how
// late it came after its delay.
func (s *storm) noteArrival(id, attempt int) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.arrivals[[2]int{id, attempt}]++
	if retry := attempt - 1; retry >= 1 && retry <= len(stormDelays) {
		if at, ok := s.retried[[2]int{id, attempt}]; ok {
			if late := now.Sub(at) - stormDelays[retry-1]; late > s.late {
				s.late, s.lateAt = late, [2]int{id, attempt}
			}
		}
	}
	s.progress.Add(1)
}

// event records a kill or restart, with the storm's progress then.
func (s *storm) event(start time.Time, what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, fmt.Sprintf("%6.1fs %s (deliveries so far %d, retries %d)",
		time.Since(start).Seconds(), what, s.progress.Load(), len(s.retried)))
}

// doneHandling reports how many ids meant to succeed have been handled.
func (s *storm) doneHandling() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.handled)
}
