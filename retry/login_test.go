package retry

import (
	"context"
	"crypto/tls"
	"errors"
	"net/url"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/brokertest"
)

// TestLoginOf: the login the AMQP 1.0 connection uses is the one amqp091
// dials with: the URL's, or config's PLAIN mechanism, with TLS for amqps.
func TestLoginOf(t *testing.T) {
	l := loginOf("amqp://orders:s3cret@rabbit:5672/shop", amqp.Config{})
	if l.user != "orders" || l.pass != "s3cret" || l.tls != nil || !l.dialed {
		t.Errorf("from the URL: %+v", l)
	}
	l = loginOf("amqp://orders:s3cret@rabbit:5672/shop", amqp.Config{SASL: []amqp.Authentication{&amqp.PlainAuth{Username: "u", Password: "p"}}})
	if l.user != "u" || l.pass != "p" {
		t.Errorf("config's PLAIN mechanism wins: %+v", l)
	}
	l = loginOf("amqps://orders:s3cret@rabbit:5671/shop", amqp.Config{})
	if l.tls == nil || l.tls.ServerName != "rabbit" || l.tls.MinVersion != tls.VersionTLS12 {
		t.Errorf("amqps: %+v", l.tls)
	}
	mine := &tls.Config{ServerName: "other"}
	l = loginOf("amqps://orders:s3cret@rabbit:5671/shop", amqp.Config{TLSClientConfig: mine})
	if l.tls == nil || l.tls == mine || l.tls.ServerName != "other" {
		t.Errorf("config's TLS, a copy of it: %+v", l.tls)
	}
}

// TestLoginFromTheDial: the login reaches the session that asked for it
// through the context of its dial, from DialURL and DialURLs alike, and
// opens the AMQP 1.0 connection (on a broker that speaks it); without
// it (New, a dial whose context did not ask) dial10 refuses.
func TestLoginFromTheDial(t *testing.T) {
	b := brokertest.Get(t)
	raw := b.AMQPURLFor(b.NewVhost(t))
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	pass, _ := u.User.Password()
	for name, dial := range map[string]Dialer{
		"DialURL":  DialURL(raw, amqp.Config{}),
		"DialURLs": DialURLs([]string{raw}, amqp.Config{}),
	} {
		ctx, l := withLoginSink(context.Background())
		conn, err := dial(ctx)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !l.dialed || l.user != u.User.Username() || l.pass != pass {
			t.Errorf("%s: the session's login is %q/%t, want %q with its password", name, l.user, l.pass == pass, u.User.Username())
		}
		c10, err := dial10(context.Background(), conn, l)
		switch {
		case err == nil:
			c10.Close()
		case errors.Is(err, errNoLogin):
			t.Errorf("%s: dial10 with the dial's login: %v", name, err)
		}
		conn.Close()
	}
	conn, err := DialURL(raw, amqp.Config{})(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := dial10(context.Background(), conn, nil); !errors.Is(err, errNoLogin) {
		t.Errorf("dial10 without a login: %v, want errNoLogin", err)
	}
	_, empty := withLoginSink(context.Background())
	if _, err := dial10(context.Background(), conn, empty); !errors.Is(err, errNoLogin) {
		t.Errorf("dial10 with a login no dialer filled: %v, want errNoLogin", err)
	}
}
