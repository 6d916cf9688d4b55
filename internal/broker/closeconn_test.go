package broker_test

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
)

// A broker that never answers connection.close (a 3.10.8 node did so after
// declaring 10,000 quorum queues) must not hold rmqtopo for ever: CloseConn
// gives up after its 10 s. A proxy between client and broker stands in
// for that node once the close begins: heartbeats go on, the
// connection.close-ok never comes, the socket stays open.
func TestCloseConnWhenTheBrokerNeverAnswers(t *testing.T) {
	t.Parallel()
	bk := brokertest.Get(t)
	u, err := url.Parse(bk.AMQPURL)
	if err != nil {
		t.Fatal(err)
	}
	var silent atomic.Bool
	proxy := silencingProxy(t, u.Host, &silent)
	u.Host = proxy
	conn, err := amqp.Dial(u.String())
	if err != nil {
		t.Fatal(err)
	}
	silent.Store(true)
	done := make(chan error, 1)
	go func() { done <- broker.CloseConn(conn) }()
	// A hang guard, not a timing goal: CloseConn returns after its own
	// 10 s wait for the close-ok (closeWait), so the guard is sized on that.
	guard := waitguard.For(10 * time.Second)
	select {
	case err := <-done:
		if err == nil {
			t.Error("CloseConn reported a clean close that the broker never answered")
		}
	case <-time.After(guard):
		t.Fatalf("CloseConn still waiting for connection.close-ok %v on", guard)
	}
}

// silencingProxy forwards one connection to target and returns its
// address. Once silent is set, nothing target sends reaches the client,
// the proxy sends the client a heartbeat every second in target's place
// (the stuck node's heartbeats went on), and the client's socket stays
// open, whatever target does, until the test ends.
func silencingProxy(t *testing.T, target string, silent *atomic.Bool) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { ln.Close(); close(stop) })
	go func() {
		client, err := ln.Accept()
		if err != nil {
			return
		}
		defer client.Close()
		server, err := net.Dial("tcp", target)
		if err != nil {
			return
		}
		defer server.Close()
		go io.Copy(server, client)
		w := &lockedWriter{w: client}
		go forwardFrames(w, bufio.NewReader(server), silent)
		heartbeat := []byte{8, 0, 0, 0, 0, 0, 0, 0xCE} // type 8, channel 0, size 0, frame end
		for tick := time.NewTicker(time.Second); ; {
			select {
			case <-stop:
				tick.Stop()
				return
			case <-tick.C:
				if silent.Load() {
					_, _ = w.Write(heartbeat)
				}
			}
		}
	}()
	return ln.Addr().String()
}

// lockedWriter keeps the frames of two writers whole.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// forwardFrames copies AMQP frames (type, channel, size, payload, end
// octet) from server to client until silent is set, then drops them.
func forwardFrames(client io.Writer, server *bufio.Reader, silent *atomic.Bool) {
	head := make([]byte, 7)
	for {
		if _, err := io.ReadFull(server, head); err != nil {
			return
		}
		frame := make([]byte, 7+int(binary.BigEndian.Uint32(head[3:7]))+1)
		copy(frame, head)
		if _, err := io.ReadFull(server, frame[7:]); err != nil {
			return
		}
		if silent.Load() {
			continue
		}
		if _, err := client.Write(frame); err != nil {
			return
		}
	}
}
