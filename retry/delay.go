package retry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
)

// Delays through the levels layout.
//
// A vhost whose spec has a levels key (or a queue with layout levels) has a
// ladder of binary delay levels (see contract.Ladder): any delay from 0 to
// the ladder's maximum, chosen per message, through a handful of shared
// queues. Two things use it:
//
//   - Delayer.Delay publishes any message to a queue after a delay: a
//     scheduled send, a reminder, a poll.
//   - A Retrier given WithLevels retries a queue whose layout is levels: it
//     picks each retry's delay (its Backoff, with jitter if asked, or the
//     delay a handler returned with RetryAfter) and writes it into the
//     routing key. The queue's retry exchange still decides which retries
//     exist and sends the one past the last to the DLQ.

// Backoff gives the delay before retry number n (1 for the first retry,
// immediate retries included; the copy's contract.HeaderAttempt is n+1).
type Backoff func(n int) time.Duration

// Fixed waits d before every retry.
func Fixed(d time.Duration) Backoff { return func(int) time.Duration { return d } }

// Linear waits n × step before retry n.
func Linear(step time.Duration) Backoff {
	return func(n int) time.Duration { return step * time.Duration(max(n, 1)) }
}

// Exponential waits initial × factor^(n-1) before retry n, rounded to the
// millisecond and capped at max (no cap if max is 0), as the spec's
// exponential policy computes it.
func Exponential(initial time.Duration, factor float64, max time.Duration) Backoff {
	return func(n int) time.Duration {
		ms := float64(initial.Milliseconds()) * math.Pow(factor, float64(n-1))
		limit := float64(math.MaxInt64 / int64(time.Millisecond))
		if max > 0 {
			limit = float64(max.Milliseconds())
		}
		if ms > limit || math.IsNaN(ms) {
			ms = limit
		}
		return time.Duration(math.Round(ms)) * time.Millisecond
	}
}

// Delays waits ds[n-1] before retry n, and the last delay after that.
func Delays(ds ...time.Duration) Backoff {
	return func(n int) time.Duration {
		if len(ds) == 0 {
			return 0
		}
		return ds[min(max(n, 1), len(ds))-1]
	}
}

// FullJitter draws each delay uniformly between 0 and what b gives, so
// that messages failing together do not come back together.
func (b Backoff) FullJitter() Backoff {
	return func(n int) time.Duration {
		d := b(n)
		if d <= 0 {
			return 0
		}
		return rand.N(d + 1)
	}
}

// After shifts b past a queue's immediate retries: with
// immediate_retries: i, delayed retry 1 is retry number i+1, and
// b.After(i) gives it b(1).
func (b Backoff) After(immediate int) Backoff {
	return func(n int) time.Duration { return b(n - immediate) }
}

// DelayError asks for a retry after Delay; see RetryAfter.
type DelayError struct {
	Delay time.Duration
	Err   error // the cause, recorded as the last error; may be nil
}

func (e *DelayError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("retry after %s", e.Delay)
	}
	return fmt.Sprintf("retry after %s: %v", e.Delay, e.Err)
}

func (e *DelayError) Unwrap() error { return e.Err }

// RetryAfter is a handler's error asking for the next retry after d
// ("429, retry after 37s"), instead of the Backoff's delay. The retry
// counts as an attempt like any other. Two routes honour it: the delay
// ladder (a Retrier WithLevels; a delay beyond the ladder's maximum is cut
// to the maximum) and a native queue's AMQP 1.0 route. On the others (wait
// queues, a native queue's basic.reject route) the topology's own delay
// applies, and the Retrier logs a warning saying so, once per queue.
func RetryAfter(d time.Duration) error { return &DelayError{Delay: d} }

// levels is what WithLevels configures.
type levels struct {
	ladder  contract.Ladder
	backoff Backoff
}

// WithLevels makes a Retrier retry through the vhost's delay ladder: for a
// queue whose spec layout is levels. backoff gives each retry's delay
// (write the spec's policy again, e.g. Exponential(time.Second, 2,
// time.Minute).FullJitter()); a handler's RetryAfter overrides it. New
// checks that the ladder is provisioned.
func WithLevels(ladder contract.Ladder, backoff Backoff) Option {
	return func(o *options) { o.levels = &levels{ladder: ladder, backoff: backoff} }
}

// checkExchange passively declares an exchange on a channel of its own (a
// failed passive declare closes its channel).
func checkExchange(conn *amqp.Connection, name, kind, what string) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("retry: opening a channel to check %s: %w", what, err)
	}
	defer ch.Close()
	if err := ch.ExchangeDeclarePassive(name, kind, true, false, false, false, nil); err != nil {
		var aerr *amqp.Error
		if errors.As(err, &aerr) && aerr.Code == amqp.NotFound {
			return fmt.Errorf("retry: %s has no exchange %q: the ladder given does not match the spec's levels (resolution and max), or run `rmqtopo apply`: %w", what, name, errTopology)
		}
		return fmt.Errorf("retry: checking exchange %q of %s: %w", name, what, err)
	}
	return nil
}

// Delayer publishes messages that arrive at a queue after a delay, through
// a vhost's delay ladder. It is safe for concurrent use.
type Delayer struct {
	ladder contract.Ladder
	pub    *publisher
}

// NewDelayer returns a Delayer publishing over conn through ladder (the
// spec's levels: contract.NewLadder(resolution, max)). It checks that the
// ladder's entry and delivery exchanges exist. It takes WithLogger and
// WithConfirmTimeout, and refuses the other options rather than drop them.
func NewDelayer(conn *amqp.Connection, ladder contract.Ladder, opts ...Option) (*Delayer, error) {
	if conn == nil {
		return nil, errors.New("retry: nil connection")
	}
	if ladder.Levels < 1 || ladder.Resolution <= 0 {
		return nil, fmt.Errorf("retry: invalid ladder %+v: use contract.NewLadder", ladder)
	}
	o := newOptions(opts)
	if o.levels != nil || len(o.obs) > 0 {
		return nil, errors.New("retry: NewDelayer takes WithLogger and WithConfirmTimeout only (WithLevels and WithObserver are a Retrier's)")
	}
	what := "the delay " + ladder.String()
	for _, x := range []string{ladder.EntryExchange(), ladder.DeliveryExchange()} {
		if err := checkExchange(conn, x, "topic", what); err != nil {
			return nil, err
		}
	}
	return &Delayer{ladder: ladder, pub: newPublisher(conn, o.log, o.confirmTimeout, func(int) {})}, nil
}

// Ladder is the ladder d publishes through.
func (dl *Delayer) Ladder() contract.Ladder { return dl.ladder }

// Delay publishes msg to the queue destination, to arrive after delay d
// (0 up to the ladder's MaxDelay; rounded up to its resolution, so never
// early). It returns once the broker confirmed the message. Headers and
// properties are kept, except the broker's dead-lettering headers (a copied
// x-death could make the broker drop the message as a cycle) and
// Expiration, which would expire it early inside a level; its priority is
// raised to contract.RetryPriority, so that it reaches any consumer of a
// 4.0+ quorum queue ahead of the backlog when it is due. destination must
// be a queue of the spec: the ladder's delivery exchange binds every one;
// a message for another queue ends in the ladder's DLQ.
func (dl *Delayer) Delay(ctx context.Context, destination string, msg amqp.Publishing, d time.Duration) error {
	if destination == "" {
		return errors.New("retry: delay: empty destination queue")
	}
	key, err := dl.ladder.RoutingKey(d, destination)
	if err != nil {
		return fmt.Errorf("retry: delay to %q: %w", destination, err)
	}
	h := make(amqp.Table, len(msg.Headers))
	for k, v := range msg.Headers {
		if !contract.DeathHeaders(k) {
			h[k] = v
		}
	}
	msg.Headers, msg.Expiration = h, ""
	msg.Priority = contract.RetryPriorityOf(msg.Priority)
	x := dl.ladder.EntryExchange()
	res := dl.pub.publish(ctx, x, key, msg)
	switch {
	case res.err != nil:
		return fmt.Errorf("retry: delay to %q: publishing to %q: %w", destination, x, res.err)
	case !res.acked:
		return fmt.Errorf("retry: delay to %q: the broker nacked the message", destination)
	case res.returned:
		return fmt.Errorf("retry: delay to %q: exchange %q could not route the message (is the ladder provisioned? run `rmqtopo apply`)", destination, x)
	}
	return nil
}

// Close closes the Delayer's publish channel, not the connection.
func (dl *Delayer) Close() error {
	if err := dl.pub.close(); err != nil {
		return fmt.Errorf("retry: closing the delay channel: %w", err)
	}
	return nil
}
