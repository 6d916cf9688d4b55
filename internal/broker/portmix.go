package broker

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// A port mix-up, the management URL aimed at the AMQP port or the AMQP URL
// at the management API's, is named from what the peer answers. An AMQP
// server answers an HTTP request with its protocol header ("AMQP..."),
// which net/http reports as a malformed response at once. The management
// API does not answer the AMQP protocol header at all: RabbitMQ's web
// server waits 5 s for a request line and closes the connection, which
// amqp091 reported as "EOF (AMQP 501)" (probed on 3.10.8, 4.0.5, 4.3.6).
// So a plain AMQP dial that has read nothing after probeAfter asks the
// port, on a connection of its own, whether it speaks HTTP.

// probeAfter is how long a dial waits for the broker's first answer
// before probing the port: RabbitMQ answers the protocol header with
// connection.start at once, so a healthy dial never probes, and a mix-up
// is named in about this long instead of 5 s.
const probeAfter = 500 * time.Millisecond

// watchedConn is the TCP connection of a plain AMQP dial, watched until
// its first read returns.
type watchedConn struct {
	net.Conn
	first    sync.Once
	answered chan struct{} // closed when the first read returns, or at Close
	http     atomic.Bool   // the port answered HTTP
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.first.Do(func() {
		// Some HTTP servers answer the AMQP header with "HTTP/1.1 400".
		if bytes.HasPrefix(p[:n], []byte("HTTP/")) {
			c.http.Store(true)
		}
		close(c.answered)
	})
	return n, err
}

func (c *watchedConn) Close() error {
	c.first.Do(func() { close(c.answered) })
	return c.Conn.Close()
}

// watch probes the port when the first answer is late, and closes the
// connection when the port speaks HTTP, so that the dial fails now.
func (c *watchedConn) watch(addr string, timeout time.Duration) {
	t := time.NewTimer(probeAfter)
	defer t.Stop()
	select {
	case <-c.answered:
		return
	case <-t.C:
	}
	if answersHTTP(addr, false, timeout) {
		c.http.Store(true)
		_ = c.Conn.Close()
	}
}

// watchedDial is amqp.DefaultDial whose connections are watched; seen
// receives each, for dialFailure to ask what the port answered.
func watchedDial(timeout time.Duration, seen *watchedConn) func(network, addr string) (net.Conn, error) {
	dial := amqp.DefaultDial(timeout)
	return func(network, addr string) (net.Conn, error) {
		conn, err := dial(network, addr)
		if err != nil {
			return nil, err
		}
		seen.Conn, seen.answered = conn, make(chan struct{})
		go seen.watch(addr, timeout)
		return seen, nil
	}
}

// answersHTTP reports whether hostport answers an HTTP request with an
// HTTP response, over TLS when useTLS (certificates unchecked: only the
// answer's first bytes are looked at, and nothing secret is sent).
func answersHTTP(hostport string, useTLS bool, timeout time.Duration) bool {
	timeout = min(timeout, 3*time.Second)
	d := &net.Dialer{Timeout: timeout}
	var conn net.Conn
	var err error
	if useTLS {
		conn, err = tls.DialWithDialer(d, "tcp", hostport, &tls.Config{InsecureSkipVerify: true})
	} else {
		conn, err = d.Dial("tcp", hostport)
	}
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(conn, "HEAD / HTTP/1.0\r\n\r\n"); err != nil {
		return false
	}
	buf := make([]byte, 5)
	_, err = io.ReadFull(conn, buf)
	return err == nil && string(buf) == "HTTP/"
}

// closedEarly reports whether a dial failed as a peer that closed or reset
// the connection without an AMQP answer does: how the management API
// ends an AMQP handshake.
func closedEarly(err error) bool {
	var ae *amqp.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		(errors.As(err, &ae) && !ae.Server && ae.Code == amqp.FrameError && !strings.Contains(ae.Reason, "i/o timeout"))
}

// amqpAtHTTP is the error of an AMQP URL aimed at a port that answers HTTP.
func amqpAtHTTP(display string, useTLS bool, f Flags, err error) error {
	port := "5672"
	if useTLS {
		port = "5671"
	}
	return &Error{Kind: ErrUnreachable, Err: err, Msg: fmt.Sprintf(
		"AMQP at %s answers HTTP: this is the management API's port; AMQP is usually on %s%s",
		display, port, hint(" (set %s)", f.AMQPURL))}
}

// answeredAMQP reports whether net/http failed because the server answered
// with AMQP's protocol header. The error's type is unexported, its text
// (`malformed HTTP response "AMQP\x00\x00\t\x01"`) quotes the answer.
func answeredAMQP(err error) bool {
	return strings.Contains(err.Error(), `malformed HTTP response "AMQP`)
}

// httpAtAMQP is the error of a management URL aimed at a port that
// answers AMQP.
func httpAtAMQP(display string, f Flags, err error) error {
	port := "15672"
	if strings.HasPrefix(display, "https:") {
		port = "15671"
	}
	return &Error{Kind: ErrNotRabbitMQ, Err: err, Msg: fmt.Sprintf(
		"the server at %s answers AMQP, not HTTP: this is an AMQP port; the management API is usually on %s%s",
		display, port, hint(" (set %s)", f.URL))}
}
