package main

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	rtry "github.com/rmqtopo/rmqtopo/retry"
	"github.com/rmqtopo/rmqtopo/spec"
)

// The conservation matrix's places of a retry whose publish channel dies
// between its publish and its confirmation (issue 46 point 7, message 663
// of the node-loss storm on 4.3.6): retry.Consume takes the messages and
// fails them; the channel of the first retry it publishes goes dark,
// after the copy was written ("confirm-lost": the copy lands, its
// confirmation never reaches the helper) or before ("publish-lost": the
// copy never reaches the broker), while the consumer's channel works on.
// The helper waits for the confirmation up to its confirm timeout, and
// then must requeue the original, not ack it; 0.2 s after that
// settlement the connection is reset, as a node killed does. The change is
// then applied with the ids wherever that left them: the copy waiting,
// the original back in the work queue, or both. An ack of the original
// shows up as a lost id in publish-lost. Not native: a native queue's
// retry is a reject, no publish.
var custodyConfirmPlaces = []custodyPlace{
	{"confirm-lost", notNative, func(t *testing.T, r *custodyRun, ids []string) { r.cutRetry(t, ids, true) }},
	{"publish-lost", notNative, func(t *testing.T, r *custodyRun, ids []string) { r.cutRetry(t, ids, false) }},
}

func notNative(l custodyLayout) bool { return !l.native }

// cutRetry publishes ids to the work queue and runs retry.Consume on it,
// with a handler that fails every delivery, until its first retry's
// publish channel has gone dark (land: after the copy was written) and
// the original was requeued; then it stops the helper, before the change.
func (r *custodyRun) cutRetry(t *testing.T, ids []string, land bool) {
	t.Helper()
	r.publish(t, "", "cw", ids)
	cut := &retryCutter{land: land, requeued: make(chan struct{})}
	cut.armed.Store(true)
	dial := rtry.DialURL(r.o.b.AMQPURLFor(r.o.vhost), amqp.Config{Dial: cut.dial})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	fail := func(context.Context, amqp.Delivery) error { return errors.New("every attempt fails") }
	opts := []rtry.ConsumeOption{rtry.WithPrefetch(1), rtry.WithObserver(cut), rtry.WithConfirmTimeout(time.Second),
		rtry.WithReconnectBackoff(50*time.Millisecond, time.Second)}
	if r.layout.from == "levels" {
		ladder, err := contract.NewLadder(spec.DefaultLevelsResolution, spec.DefaultLevelsMax)
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, rtry.WithLevels(ladder, rtry.Fixed(custodyDelay)))
	}
	go func() { done <- rtry.Consume(ctx, dial, "cw", fail, opts...) }()
	// A guard: the first delivery fails at once, its confirmation is
	// waited for 1 s (the confirm timeout), then the original requeued.
	select {
	case <-cut.requeued:
	case <-time.After(waitguard.For(3 * time.Second)):
		cancel()
		t.Fatal("the helper did not requeue the delivery whose retry's publish channel went dark")
	}
	time.Sleep(200 * time.Millisecond) // the requeue (or a wrong ack) reaches the broker before the reset
	cut.reset()
	cancel()
	select {
	case <-done:
	case <-time.After(waitguard.For(3 * time.Second)): // a guard: Consume returns once its settlements end
		t.Fatal("retry.Consume did not return once stopped")
	}
}

// retryCutter is an Observer of retry.Consume and the dialer of its
// connections. At the first copy the helper publishes (ConfirmsPending's
// first +1 comes just before the publish is written) it arms every
// connection open then: the channel of the next basic.publish goes dark
// (nothing the broker sends on it arrives, and, unless land, nothing the
// helper sends on it either); the others work on. Connections dialed
// afterwards are plain.
type retryCutter struct {
	rtry.NopObserver
	land     bool
	armed    atomic.Bool
	once     sync.Once
	requeued chan struct{}

	mu    sync.Mutex
	conns []*cutConn
}

func (c *retryCutter) dial(network, addr string) (net.Conn, error) {
	conn, err := amqp.DefaultDial(30*time.Second)(network, addr)
	if err != nil {
		return nil, err
	}
	cc := &cutConn{Conn: conn, dead: make(chan struct{})}
	cc.out.skip = len(amqp091Header) // the protocol header, before the first frame
	c.mu.Lock()
	c.conns = append(c.conns, cc)
	c.mu.Unlock()
	return cc, nil
}

// amqp091Header is what a client sends before its first frame.
const amqp091Header = "AMQP\x00\x00\x09\x01"

func (c *retryCutter) ConfirmsPending(_ string, delta int) {
	if delta <= 0 || !c.armed.CompareAndSwap(true, false) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cc := range c.conns {
		cc.arm(c.land)
	}
}

func (c *retryCutter) Settled(s rtry.Settlement) {
	if s.Outcome == rtry.Requeued && !c.armed.Load() {
		c.once.Do(func() { close(c.requeued) })
	}
}

// reset drops every connection with a TCP reset, as a node killed does.
func (c *retryCutter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cc := range c.conns {
		cc.reset()
	}
}

// cutConn is a connection whose frames a retryCutter filters by channel.
type cutConn struct {
	net.Conn
	armed  atomic.Bool
	land   atomic.Bool
	dark   atomic.Int32 // the dark channel's number + 1; 0: none yet
	in     frameFilter  // from the broker
	out    frameFilter  // from the helper
	rbuf   []byte       // frames read and passed, not yet returned
	dead   chan struct{}
	closed sync.Once
}

func (cc *cutConn) arm(land bool) {
	cc.land.Store(land)
	cc.armed.Store(true)
}

func (cc *cutConn) reset() {
	cc.closed.Do(func() {
		if tcp, ok := cc.Conn.(*net.TCPConn); ok {
			_ = tcp.SetLinger(0)
		}
		_ = cc.Conn.Close()
		close(cc.dead)
	})
}

func (cc *cutConn) Write(b []byte) (int, error) {
	pass := cc.out.frames(b, func(channel uint16, publish bool) bool {
		if publish && cc.armed.Load() && cc.dark.Load() == 0 {
			cc.dark.Store(int32(channel) + 1)
		}
		return int32(channel)+1 != cc.dark.Load() || cc.land.Load()
	})
	if _, err := cc.Conn.Write(pass); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (cc *cutConn) Read(b []byte) (int, error) {
	for len(cc.rbuf) == 0 {
		buf := make([]byte, 64<<10)
		n, err := cc.Conn.Read(buf)
		cc.rbuf = cc.in.frames(buf[:n], func(channel uint16, _ bool) bool { return int32(channel)+1 != cc.dark.Load() })
		if err != nil && len(cc.rbuf) == 0 {
			return 0, err
		}
	}
	n := copy(b, cc.rbuf)
	cc.rbuf = cc.rbuf[n:]
	return n, nil
}

// frameFilter splits one direction's bytes into AMQP 0-9-1 frames and
// keeps those keep says to.
type frameFilter struct {
	skip int    // bytes to pass before the first frame
	buf  []byte // an incomplete frame
}

// frames returns the bytes of b's complete frames that keep keeps (and
// any bytes to skip), holding an incomplete frame back for the next call.
// keep is told each frame's channel and whether it is a basic.publish.
func (f *frameFilter) frames(b []byte, keep func(channel uint16, publish bool) bool) []byte {
	var out []byte
	if f.skip > 0 {
		n := min(f.skip, len(b))
		out, b, f.skip = append(out, b[:n]...), b[n:], f.skip-n
	}
	f.buf = append(f.buf, b...)
	for len(f.buf) >= 7 {
		size := int(binary.BigEndian.Uint32(f.buf[3:7]))
		if len(f.buf) < 8+size {
			break
		}
		frame := f.buf[:8+size]
		publish := frame[0] == 1 && size >= 4 && binary.BigEndian.Uint16(frame[7:9]) == 60 && binary.BigEndian.Uint16(frame[9:11]) == 40
		if keep(binary.BigEndian.Uint16(frame[1:3]), publish) {
			out = append(out, frame...)
		}
		f.buf = f.buf[8+size:]
	}
	return out
}
