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

// confirmBuffer is the capacity of the confirmation listener. The
// connection's reader goroutine hands every confirmation to it; a roomy
// buffer keeps the reader from waiting on the dispatcher.
const confirmBuffer = 4096

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
// confirmation only, while other handlers publish behind it. Confirmations
// are matched to publishes by delivery tag in a dispatcher goroutine (see
// confirmChannel), not by holding a lock across publish and wait.
type publisher struct {
	conn    *amqp.Connection
	log     *slog.Logger
	timeout time.Duration

	cur atomic.Pointer[confirmChannel] // the live channel, or nil

	mu       sync.Mutex // serialises opening; guards lastOpen and closed
	lastOpen time.Time
	closed   bool
}

func newPublisher(conn *amqp.Connection, log *slog.Logger, timeout time.Duration) *publisher {
	return &publisher{conn: conn, log: log, timeout: timeout}
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

// publish publishes msg with mandatory set and waits for the broker's
// answer, at most p.timeout. An error means the outcome is unknown.
func (p *publisher) publish(ctx context.Context, exchange, key string, msg amqp.Publishing) publishResult {
	if p.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.timeout)
		defer cancel()
	}
	cc, err := p.channel(ctx)
	if err != nil {
		return publishResult{err: err}
	}
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
	err := cc.ch.Close()
	cc.die(errPublisherClosed)
	if errors.Is(err, amqp.ErrClosed) {
		err = nil
	}
	return err
}

// pending is one publish waiting for its confirmation.
type pending struct {
	exchange, key string
	msg           *amqp.Publishing
	returned      bool               // guarded by confirmChannel.mu
	done          chan publishResult // buffered, receives exactly one result
}

// confirmChannel is one confirm-mode channel and its dispatcher.
//
// The dispatcher goroutine is the only reader of the channel's
// confirmation and return listeners. The connection's reader goroutine
// sends a basic.return to the unbuffered return listener before it
// processes the basic.ack of the same message (RabbitMQ sends the return
// first), so by the time the dispatcher sees a confirmation it has already
// recorded any return for that message. Returns carry no delivery tag, so a
// return marks every in-flight publish with the same exchange, routing key,
// headers, message id and body: at worst a routed twin is also treated as
// unroutable, which makes a duplicate in the DLQ, never a loss.
type confirmChannel struct {
	ch  *amqp.Channel
	log *slog.Logger

	mu       sync.Mutex
	byTag    map[uint64]*pending          // published, tag known
	early    map[uint64]amqp.Confirmation // confirmed before its publisher registered the tag
	inflight map[*pending]struct{}        // every unresolved publish, for return matching
	dead     atomic.Bool                  // set once; pending publishes then fail
	deadErr  error                        // why; guarded by mu
	gone     chan struct{}                // closed when dead
}

func newConfirmChannel(ch *amqp.Channel, log *slog.Logger) *confirmChannel {
	cc := &confirmChannel{
		ch:       ch,
		log:      log,
		byTag:    map[uint64]*pending{},
		early:    map[uint64]amqp.Confirmation{},
		inflight: map[*pending]struct{}{},
		gone:     make(chan struct{}),
	}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, confirmBuffer))
	returns := ch.NotifyReturn(make(chan amqp.Return)) // unbuffered: see the type's doc
	closes := ch.NotifyClose(make(chan *amqp.Error, 1))
	go cc.dispatch(confirms, returns, closes)
	return cc
}

func (cc *confirmChannel) isDead() bool { return cc.dead.Load() }

// dispatch resolves publishes until the channel is gone. It never blocks
// on anything but cc.mu, which publishers hold only for map updates, so
// the connection's reader goroutine is never held up by a handler.
func (cc *confirmChannel) dispatch(confirms <-chan amqp.Confirmation, returns <-chan amqp.Return, closes <-chan *amqp.Error) {
	for confirms != nil || returns != nil {
		select {
		case r, ok := <-returns:
			if !ok {
				returns = nil
				continue
			}
			cc.markReturned(r)
		case c, ok := <-confirms:
			if !ok {
				confirms = nil
				continue
			}
			cc.resolve(c)
		case e, ok := <-closes:
			closes = nil
			// Confirmations read before the close are already buffered:
			// resolve them first, so a confirmed publish is not reported
			// as failed.
			for drained := false; !drained; {
				select {
				case c, ok := <-confirms:
					if !ok {
						confirms = nil
						drained = true
						continue
					}
					cc.resolve(c)
				default:
					drained = true
				}
			}
			var err error = amqp.ErrClosed
			if ok && e != nil {
				err = e
			}
			cc.die(fmt.Errorf("publish channel closed: %w", err))
			// Should the connection have automatic recovery enabled, stop
			// it from reviving this channel: the publisher opens its own.
			go func() { _ = cc.ch.Close() }()
		}
	}
	cc.die(fmt.Errorf("publish channel closed: %w", amqp.ErrClosed))
}

// die fails every unresolved publish with err. Idempotent.
func (cc *confirmChannel) die(err error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.dead.Load() {
		return
	}
	cc.deadErr = err
	cc.dead.Store(true)
	close(cc.gone)
	for pd := range cc.inflight {
		pd.done <- publishResult{err: err}
	}
	clear(cc.inflight)
	clear(cc.byTag)
	clear(cc.early)
	if !errors.Is(err, errPublisherClosed) {
		cc.log.Warn("retry: publish channel lost; a new one opens on the next publish", "error", err)
	}
}

func (cc *confirmChannel) markReturned(r amqp.Return) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	n := 0
	for pd := range cc.inflight {
		if sameMessage(pd, &r) {
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

func (cc *confirmChannel) resolve(c amqp.Confirmation) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.dead.Load() {
		return
	}
	pd, ok := cc.byTag[c.DeliveryTag]
	if !ok {
		// The publisher has sent the message but not yet registered its
		// tag; it will find the answer here.
		cc.early[c.DeliveryTag] = c
		return
	}
	delete(cc.byTag, c.DeliveryTag)
	delete(cc.inflight, pd)
	pd.done <- publishResult{acked: c.Ack, returned: pd.returned}
}

// publish sends msg and waits for its confirmation, the channel's death,
// or ctx.
func (cc *confirmChannel) publish(ctx context.Context, exchange, key string, msg amqp.Publishing) publishResult {
	pd := &pending{exchange: exchange, key: key, msg: &msg, done: make(chan publishResult, 1)}
	// Register for return matching before the message can reach the
	// broker: a return may arrive before PublishWithDeferredConfirm
	// returns.
	cc.mu.Lock()
	if cc.dead.Load() {
		err := cc.deadErr
		cc.mu.Unlock()
		return publishResult{err: err}
	}
	cc.inflight[pd] = struct{}{}
	cc.mu.Unlock()

	// amqp091 assigns the delivery tag and sends the frames under the
	// channel's own lock, so the tag order is the wire order.
	dc, err := cc.ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, true, false, msg)
	if err != nil || dc == nil {
		cc.mu.Lock()
		delete(cc.inflight, pd)
		cc.mu.Unlock()
		if err == nil {
			err = errors.New("publish channel is not in confirm mode")
		}
		if errors.Is(err, amqp.ErrClosed) {
			cc.die(fmt.Errorf("publish channel closed: %w", err))
		}
		return publishResult{err: fmt.Errorf("publishing to exchange %q: %w", exchange, err)}
	}
	tag := dc.DeliveryTag

	cc.mu.Lock()
	if c, ok := cc.early[tag]; ok {
		delete(cc.early, tag)
		delete(cc.inflight, pd)
		pd.done <- publishResult{acked: c.Ack, returned: pd.returned}
	} else if _, live := cc.inflight[pd]; live {
		cc.byTag[tag] = pd
	} // else: die() already answered pd.
	cc.mu.Unlock()

	select {
	case r := <-pd.done:
		return r
	case <-ctx.Done():
		// The answer may still come: the dispatcher then drops it into
		// pd.done, which nobody reads. The outcome is unknown here.
		select {
		case r := <-pd.done:
			return r
		default:
		}
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
