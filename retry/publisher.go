package retry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
)

// errPublisherClosed is returned by publishes after Close.
var errPublisherClosed = errors.New("retry: retrier closed")

// minReopenInterval spaces attempts to open a new publish channel, so that a
// broker refusing every publish (a deleted exchange closes the channel each
// time) does not turn into a tight open/close loop.
const minReopenInterval = 200 * time.Millisecond

// publishResult is how the broker answered one publish.
type publishResult struct {
	acked    bool  // basic.ack (false: basic.nack)
	returned bool  // basic.return came first: the message was unroutable
	err      error // no answer: the channel closed, or the wait timed out
}

// publisher owns one confirm-mode channel, shared by every handler of a
// Retrier, and opens a new one lazily after the broker or the network
// closed the previous one.
//
// Publishes are pipelined: a handler publishes and then waits for its own
// confirmation only, while other handlers publish behind it (see
// confirmChannel).
type publisher struct {
	conn    *amqp.Connection
	log     *slog.Logger
	timeout time.Duration
	pending func(delta int) // told of each copy waiting for its answer

	cur atomic.Pointer[confirmChannel] // the live channel, or nil

	mu       sync.Mutex // serialises opening; guards lastOpen and closed
	lastOpen time.Time
	closed   bool
}

func newPublisher(conn *amqp.Connection, log *slog.Logger, timeout time.Duration, pending func(delta int)) *publisher {
	return &publisher{conn: conn, log: log, timeout: timeout, pending: pending}
}

// channel returns the live confirm channel, opening one if there is none.
func (p *publisher) channel(ctx context.Context) (*confirmChannel, error) {
	if cc := p.cur.Load(); cc != nil && !cc.isDead() {
		return cc, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errPublisherClosed
	}
	if cc := p.cur.Load(); cc != nil && !cc.isDead() {
		return cc, nil
	}
	if wait := time.Until(p.lastOpen.Add(minReopenInterval)); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	p.lastOpen = time.Now()
	ch, err := p.conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("opening publish channel: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, fmt.Errorf("enabling publisher confirms: %w", err)
	}
	cc := newConfirmChannel(ch, p.log)
	p.cur.Store(cc)
	return cc, nil
}

// Pauses before publishing a nacked copy again: from nackPauseMin,
// doubling up to nackPauseMax.
const (
	nackPauseMin = 100 * time.Millisecond
	nackPauseMax = time.Second
)

// publish publishes msg with mandatory set and waits for the broker's
// answer, all within p.timeout. An error means the outcome is unknown.
//
// A nack is published again after a pause, until the broker acks or
// p.timeout runs out (then the nack is the answer). A broker nacks while
// the target queue cannot take the copy, typically a quorum queue between
// leaders, which lasts seconds. Requeueing the original at once instead
// would loop it through its work queue, handler and all, as fast as the
// broker nacks, and a quorum work queue dead-letters it past its delivery
// limit: into the DLQ with retries left (seen in the node-loss storm).
func (p *publisher) publish(ctx context.Context, exchange, key string, msg amqp.Publishing) publishResult {
	if p.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.timeout)
		defer cancel()
	}
	for pause := nackPauseMin; ; pause = min(2*pause, nackPauseMax) {
		res := p.publishOnce(ctx, exchange, key, msg)
		if res.err != nil || res.acked {
			return res
		}
		p.log.Debug("retry: broker nacked a copy; publishing it again", "exchange", exchange, "message_id", msg.MessageId, "in", pause)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return res
		case <-t.C:
		}
		// Both may have fired, and select picks either: past p.timeout
		// the nack is the answer, not a publish refused for lack of time.
		if ctx.Err() != nil {
			return res
		}
	}
}

// publishOnce publishes msg once and waits for the broker's answer.
func (p *publisher) publishOnce(ctx context.Context, exchange, key string, msg amqp.Publishing) publishResult {
	cc, err := p.channel(ctx)
	if err != nil {
		return publishResult{err: err}
	}
	p.pending(1)
	defer p.pending(-1)
	return cc.publish(ctx, exchange, key, msg)
}

// close closes the current channel; later publishes fail.
func (p *publisher) close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	cc := p.cur.Swap(nil)
	if cc == nil {
		return nil
	}
	cc.die(errPublisherClosed)
	err := cc.ch.Close()
	if errors.Is(err, amqp.ErrClosed) {
		err = nil
	}
	return err
}

// pending is one publish waiting for its confirmation.
type pending struct {
	exchange, key string
	msg           *amqp.Publishing
	returned      bool // guarded by confirmChannel.mu
}

// confirmChannel is one confirm-mode channel shared by concurrent
// publishers.
//
// Confirmations are matched to publishes by delivery tag in the
// connection's reader goroutine: amqp091 resolves the DeferredConfirmation
// of each tag as its basic.ack or basic.nack arrives (multiple=true ones
// included), and each publisher waits on its own. No lock is held across
// publish and wait, so publishes from many handlers are in flight together.
//
// Returns carry no delivery tag. RabbitMQ sends a message's basic.return
// before its basic.ack, and the reader goroutine puts the return into the
// buffered return listener before it resolves the confirmation; so once a
// publisher's confirmation is resolved, its return (if any) is in the
// buffer or was already taken out by another publisher. Publishers drain
// the buffer under mu and mark the in-flight publishes each return matches
// (same exchange, routing key, message id, correlation id, attempt and
// body: a false match only sends a routed twin to the DLQ as well, a
// duplicate, never a loss), then read their own mark under the same lock.
// The buffer cannot fill: every return in it belongs to a publish that still
// holds one of the channel's slots, and a publish drains the buffer before
// it frees its slot.
type confirmChannel struct {
	ch      *amqp.Channel
	log     *slog.Logger
	returns <-chan amqp.Return
	slots   chan struct{} // one per publish in flight; capacity returnBuffer

	mu       sync.Mutex
	inflight map[*pending]struct{} // for return matching

	dead    atomic.Bool
	dieOnce sync.Once
	deadErr error         // set before gone closes
	gone    chan struct{} // closed when the channel is unusable
}

// returnBuffer is the capacity of the return listener and so the number of
// publishes one channel has in flight at most.
const returnBuffer = 1024

func newConfirmChannel(ch *amqp.Channel, log *slog.Logger) *confirmChannel {
	cc := &confirmChannel{
		ch:       ch,
		log:      log,
		returns:  ch.NotifyReturn(make(chan amqp.Return, returnBuffer)),
		slots:    make(chan struct{}, returnBuffer),
		inflight: map[*pending]struct{}{},
		gone:     make(chan struct{}),
	}
	closes := ch.NotifyClose(make(chan *amqp.Error, 1))
	go func() {
		e, ok := <-closes
		var err error = amqp.ErrClosed
		if ok && e != nil {
			err = e
			// Should the connection have automatic recovery enabled, stop
			// it from reviving this channel: the publisher opens its own.
			defer func() { go func() { _ = ch.Close() }() }()
		}
		cc.die(fmt.Errorf("publish channel closed: %w", err))
	}()
	return cc
}

func (cc *confirmChannel) isDead() bool { return cc.dead.Load() }

// die marks the channel unusable, with err as the reason. Idempotent.
func (cc *confirmChannel) die(err error) {
	cc.dieOnce.Do(func() {
		cc.deadErr = err
		cc.dead.Store(true)
		close(cc.gone)
		if !errors.Is(err, errPublisherClosed) {
			cc.log.Warn("retry: publish channel lost; a new one opens on the next publish", "error", err)
		}
	})
}

// reason returns why the channel died, waiting briefly for the close
// notification that follows the channel's shutdown.
func (cc *confirmChannel) reason() error {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-cc.gone:
		return cc.deadErr
	case <-t.C:
		return fmt.Errorf("publish channel closed: %w", amqp.ErrClosed)
	}
}

// drainLocked marks the in-flight publishes that the buffered returns
// match. cc.mu must be held.
func (cc *confirmChannel) drainLocked() {
	for {
		select {
		case r, ok := <-cc.returns:
			if !ok {
				return
			}
			cc.markLocked(&r)
		default:
			return
		}
	}
}

func (cc *confirmChannel) markLocked(r *amqp.Return) {
	n := 0
	for pd := range cc.inflight {
		if sameMessage(pd, r) {
			pd.returned = true
			n++
		}
	}
	if n == 0 {
		// Cannot happen while the return precedes its ack and the message
		// comes back as published. Should it happen, fail safe: every
		// publish in flight to that exchange is treated as returned (a
		// possible duplicate in the DLQ rather than a possible loss).
		cc.log.Error("retry: basic.return matched no in-flight publish; treating every in-flight publish to its exchange as returned",
			"exchange", r.Exchange, "routing_key", r.RoutingKey, "message_id", r.MessageId, "reply", r.ReplyText)
		for pd := range cc.inflight {
			if pd.exchange == r.Exchange {
				pd.returned = true
			}
		}
	}
}

// finish collects pd's return, if any, forgets pd and frees its slot. Call
// it only once pd's confirmation is resolved (or its publish failed).
func (cc *confirmChannel) finish(pd *pending) (returned bool) {
	cc.mu.Lock()
	cc.drainLocked()
	returned = pd.returned
	delete(cc.inflight, pd)
	cc.mu.Unlock()
	<-cc.slots
	return returned
}

// publish sends msg and waits for its confirmation, the channel's death,
// or ctx.
func (cc *confirmChannel) publish(ctx context.Context, exchange, key string, msg amqp.Publishing) publishResult {
	select {
	case cc.slots <- struct{}{}:
	case <-cc.gone:
		return publishResult{err: cc.deadErr}
	case <-ctx.Done():
		return publishResult{err: fmt.Errorf("waiting to publish: %w", ctx.Err())}
	}
	// Register for return matching before the message can reach the
	// broker.
	pd := &pending{exchange: exchange, key: key, msg: &msg}
	cc.mu.Lock()
	cc.inflight[pd] = struct{}{}
	cc.mu.Unlock()

	dc, err := cc.ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, true, false, msg)
	if err != nil || dc == nil {
		cc.finish(pd)
		if err == nil {
			err = errors.New("publish channel is not in confirm mode")
		}
		if errors.Is(err, amqp.ErrClosed) {
			return publishResult{err: cc.reason()}
		}
		return publishResult{err: fmt.Errorf("publishing to exchange %q: %w", exchange, err)}
	}
	select {
	case <-dc.Done():
		returned := cc.finish(pd)
		if !dc.Acked() && cc.ch.IsClosed() {
			// amqp091 nacks every unconfirmed publish when the channel
			// shuts down: this is no broker nack.
			return publishResult{err: cc.reason()}
		}
		return publishResult{acked: dc.Acked(), returned: returned}
	case <-ctx.Done():
		// The answer may still come (or the channel's shutdown resolves
		// it); keep the slot until then, so a late return still has room.
		go func() {
			<-dc.Done()
			cc.finish(pd)
		}()
		return publishResult{err: fmt.Errorf("waiting for the broker's confirmation: %w", ctx.Err())}
	}
}

// sameMessage reports whether a return can be the return of pd. It
// compares what survives the round trip byte for byte (no header types,
// which the codec may widen): a false match only costs a duplicate.
func sameMessage(pd *pending, r *amqp.Return) bool {
	m := pd.msg
	return pd.exchange == r.Exchange && pd.key == r.RoutingKey &&
		m.MessageId == r.MessageId && m.CorrelationId == r.CorrelationId &&
		headerString(m.Headers, contract.HeaderAttempt) == headerString(r.Headers, contract.HeaderAttempt) &&
		bytes.Equal(m.Body, r.Body)
}

func headerString(h amqp.Table, name string) string {
	s, _ := h[name].(string)
	return s
}
