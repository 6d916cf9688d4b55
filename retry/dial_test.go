package retry_test

import (
	"context"
	"crypto/tls"
	"net/url"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/retry"
)

// TestDialURLs runs DialURLs against the test node and two ports where
// nothing listens: it reaches the node past a dead one, again on the next
// call, names every node (without its password) when none answers, and
// never writes the caller's TLS config.
func TestDialURLs(t *testing.T) {
	b := brokertest.Get(t)
	// Guards: the whole test takes 0.03 s; 6 s keeps the minute the
	// context had. The dial timeout bounds each node's connect and AMQP
	// handshake: milliseconds with the test node, and the dead ports
	// refuse at once. (At 2 s, a broker pausing longer would fail the test.)
	ctx, cancel := context.WithTimeout(context.Background(), waitguard.For(6*time.Second))
	defer cancel()
	const dead1, dead2 = "amqp://guest:s3cret@127.0.0.1:1/", "amqp://guest:s3cret@127.0.0.1:2/"
	cfg := amqp.Config{Dial: amqp.DefaultDial(waitguard.For(100 * time.Millisecond))}

	dial := retry.DialURLs([]string{dead1, b.AMQPURL}, cfg)
	for call := 1; call <= 2; call++ {
		conn, err := dial(ctx)
		if err != nil {
			t.Fatalf("call %d: %v", call, err)
		}
		conn.Close()
	}

	_, err := retry.DialURLs([]string{dead1, dead2}, cfg)(ctx)
	if err == nil {
		t.Fatal("no node answers, and yet no error")
	}
	msg := err.Error()
	if !strings.Contains(msg, "127.0.0.1:1") || !strings.Contains(msg, "127.0.0.1:2") || strings.Contains(msg, "s3cret") {
		t.Errorf("error %q: want both nodes named and no password", msg)
	}

	// amqp091 names the host it dials in the TLS config it is given: an
	// amqps dial to the plain AMQP port connects, then fails the handshake.
	u, err := url.Parse(b.AMQPURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Scheme = "amqps"
	shared := &tls.Config{}
	if _, err := retry.DialURLs([]string{u.String()}, amqp.Config{TLSClientConfig: shared, Dial: cfg.Dial})(ctx); err == nil {
		t.Fatal("a TLS handshake with a plain AMQP port succeeded")
	}
	if shared.ServerName != "" {
		t.Errorf("the caller's TLS config was written: ServerName %q", shared.ServerName)
	}
}
