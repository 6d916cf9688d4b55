package main

import (
	"context"
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
// of the node-loss storm on 4.3.6): rtry.Consume takes the messages and
// fails them; the first retry it publishes has its connection cut, either
// after the copy was written ("confirm-lost": the copy lands, its
// confirmation never reaches the helper) or before ("publish-lost": the
// copy never reaches the broker), then reset. The helper must neither ack
// the original (which the broker gives back when the connection goes) nor
// lose the copy; the change is then applied with the ids wherever that
// left them: the copy waiting, the original back in the work queue,
// retried again, or both. Not native: a native queue's retry is a reject,
// no publish.
var custodyConfirmPlaces = []custodyPlace{
	{"confirm-lost", notNative, func(t *testing.T, r *custodyRun, ids []string) { r.cutRetry(t, ids, true) }},
	{"publish-lost", notNative, func(t *testing.T, r *custodyRun, ids []string) { r.cutRetry(t, ids, false) }},
}

func notNative(l custodyLayout) bool { return !l.native }

// cutRetry publishes ids to the work queue and runs rtry.Consume on it,
// with a handler that fails every delivery, until its first retry's
// connection has been cut (land: after the copy was written) and the
// original requeued; then it stops the helper, before the change.
func (r *custodyRun) cutRetry(t *testing.T, ids []string, land bool) {
	t.Helper()
	r.publish(t, "", "cw", ids)
	cut := &retryCutter{land: land, requeued: make(chan struct{})}
	cut.armed.Store(true)
	dial := rtry.DialURL(r.o.b.AMQPURLFor(r.o.vhost), amqp.Config{Dial: cut.dial})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	fail := func(context.Context, amqp.Delivery) error { return errors.New("every attempt fails") }
	opts := []rtry.ConsumeOption{rtry.WithPrefetch(1), rtry.WithObserver(cut), rtry.WithReconnectBackoff(50*time.Millisecond, time.Second)}
	if r.layout.from == "levels" {
		ladder, err := contract.NewLadder(spec.DefaultLevelsResolution, spec.DefaultLevelsMax)
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, rtry.WithLevels(ladder, rtry.Fixed(custodyDelay)))
	}
	go func() { done <- rtry.Consume(ctx, dial, "cw", fail, opts...) }()
	// A guard: the first delivery fails at once, the cut resets its
	// connection 0.2 s later, and the broker requeues the original.
	select {
	case <-cut.requeued:
	case <-time.After(waitguard.For(3 * time.Second)):
		cancel()
		t.Fatal("the helper did not requeue the delivery whose retry's connection was cut")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(waitguard.For(3 * time.Second)): // a guard: Consume returns once its settlements end
		t.Fatal("rtry.Consume did not return once stopped")
	}
}

// retryCutter is an Observer of rtry.Consume and the dialer of its
// connections: at the first copy the helper publishes (ConfirmsPending's
// first +1 comes just before the publish is written), every connection
// open then stops passing what the broker sends (a confirmation is lost)
// and, unless land, what the helper sends (the copy is lost); 0.2 s
// later they are reset. Connections dialed afterwards are plain.
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
	c.mu.Lock()
	c.conns = append(c.conns, cc)
	c.mu.Unlock()
	return cc, nil
}

func (c *retryCutter) ConfirmsPending(_ string, delta int) {
	if delta <= 0 || !c.armed.CompareAndSwap(true, false) {
		return
	}
	c.mu.Lock()
	conns := c.conns
	c.mu.Unlock()
	for _, cc := range conns {
		cc.cut(c.land)
	}
	time.AfterFunc(200*time.Millisecond, func() {
		for _, cc := range conns {
			cc.reset()
		}
	})
}

func (c *retryCutter) Settled(s rtry.Settlement) {
	if s.Outcome == rtry.Requeued && !c.armed.Load() {
		c.once.Do(func() { close(c.requeued) })
	}
}

// cutConn is a connection a retryCutter can cut and reset.
type cutConn struct {
	net.Conn
	cutting atomic.Bool
	dropOut atomic.Bool
	dead    chan struct{}
	closed  sync.Once
}

func (cc *cutConn) cut(land bool) {
	cc.dropOut.Store(!land)
	cc.cutting.Store(true)
}

// reset drops the connection with a TCP reset, as a node killed does.
func (cc *cutConn) reset() {
	cc.closed.Do(func() {
		if tcp, ok := cc.Conn.(*net.TCPConn); ok {
			_ = tcp.SetLinger(0)
		}
		_ = cc.Conn.Close()
		close(cc.dead)
	})
}

func (cc *cutConn) Read(b []byte) (int, error) {
	n, err := cc.Conn.Read(b)
	if cc.cutting.Load() {
		<-cc.dead // what the broker sent since the cut never arrives
		return 0, errors.New("read: connection reset by peer")
	}
	return n, err
}

func (cc *cutConn) Write(b []byte) (int, error) {
	if cc.cutting.Load() && cc.dropOut.Load() {
		return len(b), nil
	}
	return cc.Conn.Write(b)
}
