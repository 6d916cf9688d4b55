package broker

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// serveRaw accepts connections on a local port and answers each with
// answer once it has read what the client sent first; it returns the port's
// host:port.
func serveRaw(t *testing.T, answer string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 512)
				if _, err := c.Read(buf); err == nil {
					_, _ = io.WriteString(c, answer)
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// testSession is a session on amqpHost that needs no management API.
func testSession(t *testing.T, amqpHost string) *Session {
	t.Helper()
	c, err := NewClient(Config{URL: "http://127.0.0.1:1", Timeout: 30 * time.Second, Flags: Flags{AMQPURL: "--amqp-url"}})
	if err != nil {
		t.Fatal(err)
	}
	u := &url.URL{Scheme: "amqp", User: url.UserPassword("guest", "guest"), Host: amqpHost, Path: "/"}
	return &Session{Client: c, amqpURL: u, display: "amqp://" + amqpHost, vhosts: map[string]*vhostConn{}}
}

// An AMQP URL aimed at an HTTP server is named as such, whether the server
// stays silent on the AMQP header, as RabbitMQ's management API does for
// 5 s (the dial then probes it), or answers it with an HTTP error.
func TestAMQPURLAtAnHTTPPort(t *testing.T) {
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(silent.Close)
	for name, host := range map[string]string{
		"silent":  strings.TrimPrefix(silent.URL, "http://"),
		"answers": serveRaw(t, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"),
		"closes":  serveRaw(t, ""),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := testSession(t, host).Dial("v", "test")
			var e *Error
			want := "AMQP at amqp://" + host + " answers HTTP: this is the management API's port; AMQP is usually on 5672 (set --amqp-url)"
			if name == "closes" {
				// A peer that closes without answering HTTP is not called
				// a management API.
				if err == nil || strings.Contains(err.Error(), "answers HTTP") {
					t.Fatalf("Dial = %v, want a failure that does not blame HTTP", err)
				}
				return
			}
			if !errors.As(err, &e) || e.Msg != want {
				t.Fatalf("Dial = %v\nwant %s", err, want)
			}
		})
	}
}

// A management URL aimed at an AMQP port, which answers an HTTP request
// with AMQP's protocol header, is named as such.
func TestManagementURLAtAnAMQPPort(t *testing.T) {
	host := serveRaw(t, "AMQP\x03\x01\x00\x00")
	c, err := NewClient(Config{URL: "http://" + host, Flags: Flags{URL: "--url"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Server(context.Background())
	want := "the server at http://" + host + " answers AMQP, not HTTP: this is an AMQP port; the management API is usually on 15672 (set --url)"
	if !errors.Is(err, ErrNotRabbitMQ) || err.Error() != want {
		t.Fatalf("Server = %v\nwant %s", err, want)
	}
}
