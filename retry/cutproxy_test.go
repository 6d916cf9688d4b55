package retry_test

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// cutProxy forwards TCP connections to a broker and can cut them the way
// a node killed mid-publish does: from cut on, nothing the broker sends
// reaches the client (its confirmation is lost), and, unless the publish
// is to land, nothing the client sends reaches the broker either; reset
// then drops every connection with a TCP reset, which the client reads
// as "connection reset by peer". Connections made after reset are plain.
type cutProxy struct {
	ln     net.Listener
	broker string

	mu    sync.Mutex
	conns []*cutConn

	cutting atomic.Bool // new bytes are held back from now
	land    atomic.Bool // the client's bytes still reach the broker
	// seen are the AMQP method frames each way since cut, parsed from
	// the bytes of that direction since then (a cut falls between frames:
	// nothing else is on the wire when a handler publishes).
	seen   [2]frames
	notify chan struct{} // a frame was seen
}

// Directions of a connection.
const (
	fromBroker = iota
	fromClient
)

// frames parses one direction's bytes into method frames.
type frames struct {
	mu      sync.Mutex
	buf     []byte
	methods map[[2]uint16]bool // class and method ids
}

// add parses b's complete frames and records their methods.
func (f *frames) add(b []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.buf = append(f.buf, b...)
	for len(f.buf) >= 7 {
		size := int(binary.BigEndian.Uint32(f.buf[3:7]))
		if len(f.buf) < 8+size {
			return
		}
		if f.buf[0] == 1 && size >= 4 { // a method frame
			if f.methods == nil {
				f.methods = map[[2]uint16]bool{}
			}
			f.methods[[2]uint16{binary.BigEndian.Uint16(f.buf[7:9]), binary.BigEndian.Uint16(f.buf[9:11])}] = true
		}
		f.buf = f.buf[8+size:]
	}
}

func (f *frames) has(class, method uint16) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.methods[[2]uint16{class, method}]
}

// cutConn is one proxied connection.
type cutConn struct{ client, server *net.TCPConn }

func newCutProxy(t *testing.T, broker string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, broker: broker, notify: make(chan struct{}, 1)}
	t.Cleanup(func() { ln.Close(); p.reset() })
	go p.serve()
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.broker)
		if err != nil {
			c.Close()
			continue
		}
		cc := &cutConn{client: c.(*net.TCPConn), server: s.(*net.TCPConn)}
		p.mu.Lock()
		p.conns = append(p.conns, cc)
		p.mu.Unlock()
		go p.pipe(cc.client, cc.server, &p.seen[fromBroker], func() bool { return false })
		go p.pipe(cc.server, cc.client, &p.seen[fromClient], p.land.Load)
	}
}

// pipe copies src to dst until either fails; once cutting, it parses what
// it reads into seen, and keeps it unless pass says to forward it.
func (p *cutProxy) pipe(dst, src *net.TCPConn, seen *frames, pass func() bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		cutting := n > 0 && p.cutting.Load()
		if cutting {
			seen.add(buf[:n])
			select {
			case p.notify <- struct{}{}:
			default:
			}
		}
		if n > 0 && (!cutting || pass()) {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			if err != io.EOF {
				_ = dst.SetLinger(0)
			}
			dst.Close()
			return
		}
	}
}

// cut starts holding bytes back; land says whether the client's still
// reach the broker.
func (p *cutProxy) cut(land bool) {
	p.land.Store(land)
	p.cutting.Store(true)
}

// reset drops every connection with a TCP reset (linger 0) on both sides,
// and lets later connections through untouched.
func (p *cutProxy) reset() {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		_ = c.client.SetLinger(0)
		_ = c.server.SetLinger(0)
		c.client.Close()
		c.server.Close()
	}
	p.cutting.Store(false)
}

// waitFrame waits until, since cut, a method frame of class and method
// came from dir (fromBroker or fromClient), and fails the test after
// guard.
func (p *cutProxy) waitFrame(t *testing.T, guard time.Duration, dir int, class, method uint16) {
	t.Helper()
	deadline := time.NewTimer(guard)
	defer deadline.Stop()
	for !p.seen[dir].has(class, method) {
		select {
		case <-p.notify:
		case <-deadline.C:
			t.Fatalf("no method %d.%d from the %s within %v of the cut", class, method, [2]string{"broker", "client"}[dir], guard)
		}
	}
}
