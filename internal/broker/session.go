package broker

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/topology"
)

// Session is a Client plus the AMQP connections of one apply: the lock
// connection of each locked vhost, and a pool of channels per vhost for
// writes. It implements target.Target and target.Locker. Close releases
// everything, locks included; so does the death of the process, because the broker deletes
// an exclusive queue with its connection.
type Session struct {
	*Client
	amqpURL *url.URL
	display string // AMQP URL without credentials or vhost
	// objects declares and deletes exchanges, queues and bindings: over
	// AMQP, or the management API (UseHTTPWrites).
	objects objectWriter
	// MigrateHook, if set, is called after each step of MigrateQueue with
	// the queue, the step (StepTemp...) and, during a move, the messages
	// moved so far. The CLI reports progress with it; tests interrupt a
	// migration there.
	MigrateHook func(queue, step string, moved int)
	// MigrateWait, if set, is called while a migration waits for what the
	// old queue holds beyond its ready messages (retries the broker holds
	// back, unsettled deliveries), about once a second, with one line
	// saying what it waits for and how long.
	MigrateWait func(queue, what string)

	mu     sync.Mutex
	vhosts map[string]*vhostConn
}

// NewSession resolves the AMQP URL (see Client.AMQPURL) and returns a
// session that has not connected yet.
func (c *Client) NewSession(ctx context.Context) (*Session, error) {
	if _, err := c.Server(ctx); err != nil {
		return nil, err
	}
	raw, err := c.AMQPURL(ctx)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("AMQP URL: %w", err)
	}
	d := url.URL{Scheme: u.Scheme, Host: u.Host}
	s := &Session{Client: c, amqpURL: u, display: d.String(), vhosts: map[string]*vhostConn{}}
	s.objects = amqpObjects{s}
	return s, nil
}

// AMQPDisplay is the AMQP URL as shown to people: no credentials.
func (s *Session) AMQPDisplay() string { return s.display }

func (s *Session) amqpUser() string {
	if s.amqpURL.User != nil {
		return s.amqpURL.User.Username()
	}
	return s.user
}

// Secrets adds the AMQP password to the client's.
func (s *Session) Secrets() []string {
	out := s.Client.Secrets()
	if s.amqpURL.User != nil {
		if p, ok := s.amqpURL.User.Password(); ok {
			out = append(out, secretForms(p, s.amqpURL.User.Username())...)
		}
	}
	return out
}

// Dial opens an AMQP connection to vhost, named for the broker's
// connection list after purpose ("rmqtopo PURPOSE (pid N on HOST)"). The
// session does not keep it: the caller closes it. Failures are *Error of
// one line that names the URL without credentials.
func (s *Session) Dial(vhost, purpose string) (*amqp.Connection, error) {
	u := *s.amqpURL
	u.Path = "/" + vhost
	u.RawPath = "/" + url.PathEscape(vhost)
	props := amqp.NewConnectionProperties()
	host, _ := os.Hostname()
	props.SetClientConnectionName(fmt.Sprintf("rmqtopo %s (pid %d on %s)", purpose, os.Getpid(), host))
	tc, certAsked := connTLS(s.cfg.TLS, u.Scheme == "amqps")
	dial := amqp.DefaultDial(s.timeout)
	seen := &watchedConn{}
	if u.Scheme == "amqp" {
		// Over TLS the first answer is the TLS handshake's, which says
		// nothing about the protocol above: dialFailure probes after.
		dial = watchedDial(s.timeout, seen)
	}
	end := s.waiting(func() string { return fmt.Sprintf("an AMQP connection to %s (vhost %q)", s.display, vhost) })
	defer end()
	conn, err := amqp.DialConfig(u.String(), amqp.Config{
		Heartbeat:       10 * time.Second,
		Locale:          "en_US",
		Properties:      props,
		TLSClientConfig: tc,
		Dial:            dial,
	})
	if err != nil {
		return nil, s.dialFailure(&u, vhost, certAsked.Load(), seen.http.Load(), err)
	}
	return conn, nil
}

// Close closes every connection of the session, releasing its locks.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, vc := range s.vhosts {
		vc.mu.Lock()
		if vc.lock != nil && !vc.lock.IsClosed() {
			releaseLock(vc.lock)
		}
		for _, c := range []*amqp.Connection{vc.work, vc.lock} {
			if c != nil && !c.IsClosed() {
				if err := CloseConn(c); err != nil {
					errs = append(errs, err)
				}
			}
		}
		vc.work, vc.lock, vc.idle = nil, nil, nil
		vc.mu.Unlock()
	}
	return errors.Join(errs...)
}

// closeWait bounds the close handshake of a connection. A RabbitMQ 3.10
// node that had just declared 10,000 quorum queues (BenchmarkPolicyScale)
// left a connection.close unanswered for minutes, with the apply done and
// the node idle: Close waited for ever. Past closeWait the socket is
// closed anyway, which the broker takes as the connection's end (its
// exclusive lock queue goes with it).
const closeWait = 10 * time.Second

// CloseConn closes c, waiting at most closeWait for the broker's answer:
// every AMQP connection rmqtopo opens ends so.
func CloseConn(c *amqp.Connection) error {
	err := c.CloseDeadline(time.Now().Add(closeWait))
	if err == nil || errors.Is(err, amqp.ErrClosed) {
		return nil
	}
	return fmt.Errorf("close the connection: %w", err)
}

// UseHTTPWrites sends the session's exchange, queue and binding writes
// through the management API instead of AMQP: slower, kept to measure the
// two (docs/benchmarks.md).
func (s *Session) UseHTTPWrites() { s.objects = s.Client }

// objectWriter declares and deletes exchanges, queues and bindings; a
// Client does it through the management API, amqpObjects over AMQP.
type objectWriter interface {
	DeclareExchange(ctx context.Context, e topology.Exchange) error
	DeclareQueue(ctx context.Context, q topology.Queue) error
	Bind(ctx context.Context, b topology.Binding) error
	Unbind(ctx context.Context, b topology.Binding) error
	DeleteExchange(ctx context.Context, vhost, name string) error
	DeleteQueue(ctx context.Context, q topology.Queue, ifEmpty bool) error
}

// DeclareExchange declares e; an identical exchange is success, a
// different one ErrInequivalent.
func (s *Session) DeclareExchange(ctx context.Context, e topology.Exchange) error {
	return s.objects.DeclareExchange(ctx, e)
}

// DeclareQueue declares q; an identical queue is success, a different one
// ErrInequivalent.
func (s *Session) DeclareQueue(ctx context.Context, q topology.Queue) error {
	return s.objects.DeclareQueue(ctx, q)
}

// Bind creates b; an existing identical binding is success.
func (s *Session) Bind(ctx context.Context, b topology.Binding) error { return s.objects.Bind(ctx, b) }

// Unbind deletes b; a missing binding, source or destination is success.
func (s *Session) Unbind(ctx context.Context, b topology.Binding) error {
	return s.objects.Unbind(ctx, b)
}

// DeleteExchange deletes an exchange with its bindings; a missing one is
// success.
func (s *Session) DeleteExchange(ctx context.Context, vhost, name string) error {
	return s.objects.DeleteExchange(ctx, vhost, name)
}
