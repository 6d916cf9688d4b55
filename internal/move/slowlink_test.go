package move_test

import (
	"io"
	"net"
	"net/url"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// dialSlow opens an AMQP connection to the env's vhost through a proxy
// that holds every byte from the broker for delay before passing it on, in
// order. The broker sees a consumer whose deliveries take that long to
// arrive: the slow network, or slow client, that a move until empty must
// not mistake for an empty queue.
func (e *env) dialSlow(delay time.Duration) *amqp.Connection {
	e.t.Helper()
	u, err := url.Parse(e.b.AMQPURLFor(e.vhost))
	if err != nil {
		e.t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { ln.Close() })
	go serveSlow(ln, u.Host, delay)
	u.Host = ln.Addr().String()
	conn, err := amqp.DialConfig(u.String(), amqp.Config{Heartbeat: 10 * time.Second, Locale: "en_US"})
	if err != nil {
		e.t.Fatalf("dialing through the slow proxy: %v", err)
	}
	e.t.Cleanup(func() { conn.Close() })
	return conn
}

// serveSlow proxies each connection accepted on ln to broker until ln
// closes.
func serveSlow(ln net.Listener, broker string, delay time.Duration) {
	for {
		client, err := ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", broker)
		if err != nil {
			client.Close()
			continue
		}
		go proxySlow(client, server, delay)
	}
}

// proxySlow passes the client's bytes to the server at once and the
// server's to the client delay after they came. Either side closing closes
// both.
func proxySlow(client, server net.Conn, delay time.Duration) {
	var once sync.Once
	done := func() { once.Do(func() { client.Close(); server.Close() }) }
	go func() {
		_, _ = io.Copy(server, client)
		done()
	}()
	type chunk struct {
		due  time.Time
		data []byte
	}
	chunks := make(chan chunk, 1<<16)
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, 32<<10)
			n, err := server.Read(buf)
			if n > 0 {
				chunks <- chunk{time.Now().Add(delay), buf[:n]}
			}
			if err != nil {
				return
			}
		}
	}()
	defer done()
	for c := range chunks {
		time.Sleep(time.Until(c.due))
		if _, err := client.Write(c.data); err != nil {
			return
		}
	}
}
