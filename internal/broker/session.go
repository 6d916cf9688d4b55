package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/topology"
)

// Session is a Client plus the AMQP connections of one apply: the lock
// connection of each locked vhost, and a pool of channels per vhost for
// writes. It implements apply.Target. Close releases everything, locks
// included; so does the death of the process, because the broker deletes
// an exclusive queue with its connection.
type Session struct {
	*Client
	amqpURL *url.URL
	display string // AMQP URL without credentials or vhost
	// HTTPWrites sends exchange, queue and binding writes through the
	// management API instead of AMQP. Slower; kept to measure the two.
	HTTPWrites bool

	mu     sync.Mutex
	vhosts map[string]*vhostConn
}

type vhostConn struct {
	mu       sync.Mutex
	lock     *amqp.Connection
	lockLost atomic.Bool
	work     *amqp.Connection
	idle     []*amqp.Channel
}

// NewSession resolves the AMQP URL (see Client.AMQPURL) and returns a
// session that has not connected yet.
func (c *Client) NewSession(ctx context.Context) (*Session, error) {
	raw, err := c.AMQPURL(ctx)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("AMQP URL: %w", err)
	}
	d := url.URL{Scheme: u.Scheme, Host: u.Host}
	return &Session{Client: c, amqpURL: u, display: d.String(), vhosts: map[string]*vhostConn{}}, nil
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

func (s *Session) conn(vhost string) *vhostConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	vc := s.vhosts[vhost]
	if vc == nil {
		vc = &vhostConn{}
		s.vhosts[vhost] = vc
	}
	return vc
}

const lockPurpose = "apply lock"

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
	conn, err := amqp.DialConfig(u.String(), amqp.Config{
		Heartbeat:       10 * time.Second,
		Locale:          "en_US",
		Properties:      props,
		TLSClientConfig: s.cfg.TLS,
		Dial:            amqp.DefaultDial(s.timeout),
	})
	if err != nil {
		return nil, dialError(s.display, s.amqpUser(), vhost, s.timeout, err)
	}
	return conn, nil
}

// Lock takes vhost's apply lock: the exclusive queue LockQueue, declared on
// a connection that stays open until Close. If another connection holds
// it, the error is ErrLocked and names the holder when the broker says who
// it is. A vhost that does not exist gives ErrVhostNotFound. Locking a
// vhost already locked by this session succeeds.
func (s *Session) Lock(ctx context.Context, vhost string) error {
	vc := s.conn(vhost)
	vc.mu.Lock()
	defer vc.mu.Unlock()
	if vc.lock != nil && !vc.lock.IsClosed() {
		return nil
	}
	conn, err := s.Dial(vhost, lockPurpose)
	if err != nil {
		return fmt.Errorf("lock vhost %q: %w", vhost, err)
	}
	ch, err := conn.Channel()
	if err == nil {
		_, err = ch.QueueDeclare(LockQueue, false, true, true, false, nil)
	}
	if err != nil {
		conn.Close()
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.ResourceLocked {
			return &Error{Kind: ErrLocked, Status: ae.Code, Err: err,
				Msg: fmt.Sprintf("another rmqtopo apply holds the lock on vhost %q%s; wait for it to finish", vhost, s.lockHolder(ctx, vhost))}
		}
		return fmt.Errorf("lock vhost %q: %w", vhost, amqpError(s.display, err))
	}
	vc.lock = conn
	vc.lockLost.Store(false)
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	go func() {
		if e := <-closed; e != nil {
			vc.lockLost.Store(true)
		}
	}()
	return nil
}

// lockHolder names the connection holding vhost's lock, best effort: the
// management API learns a queue's owner and a connection's name from
// statistics emitted every few seconds, so a lock taken a moment ago is
// reported without its holder.
func (s *Session) lockHolder(ctx context.Context, vhost string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var q struct {
		Owner json.RawMessage `json:"owner_pid_details"`
	}
	var owner struct {
		Name string `json:"name"`
	}
	// Before statistics arrive the owner is an empty list, not an object.
	if s.do(ctx, http.MethodGet, "/api/queues/"+esc(vhost)+"/"+esc(LockQueue), url.Values{"columns": {"owner_pid_details"}}, nil, &q) != nil ||
		json.Unmarshal(q.Owner, &owner) != nil || owner.Name == "" {
		return ""
	}
	var c struct {
		Props struct {
			Name string `json:"connection_name"`
		} `json:"client_properties"`
	}
	if s.do(ctx, http.MethodGet, "/api/connections/"+esc(owner.Name), nil, nil, &c) != nil || c.Props.Name == "" {
		return fmt.Sprintf(" (connection %s)", owner.Name)
	}
	return fmt.Sprintf(" (%s, connection %s)", c.Props.Name, owner.Name)
}

// Close closes every connection of the session, releasing its locks.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, vc := range s.vhosts {
		vc.mu.Lock()
		for _, c := range []*amqp.Connection{vc.work, vc.lock} {
			if c != nil && !c.IsClosed() {
				if err := c.Close(); err != nil && !errors.Is(err, amqp.ErrClosed) {
					errs = append(errs, err)
				}
			}
		}
		vc.work, vc.lock, vc.idle = nil, nil, nil
		vc.mu.Unlock()
	}
	return errors.Join(errs...)
}

// channel takes an idle channel of vhost's write connection or opens one,
// dialling the connection if it is not open.
func (s *Session) channel(vhost string) (*vhostConn, *amqp.Channel, error) {
	vc := s.conn(vhost)
	vc.mu.Lock()
	defer vc.mu.Unlock()
	if vc.lock != nil && vc.lockLost.Load() {
		return nil, nil, &Error{Kind: ErrLocked, Msg: fmt.Sprintf("lost the lock on vhost %q: its connection closed; stopping", vhost)}
	}
	for len(vc.idle) > 0 {
		ch := vc.idle[len(vc.idle)-1]
		vc.idle = vc.idle[:len(vc.idle)-1]
		if !ch.IsClosed() {
			return vc, ch, nil
		}
	}
	if vc.work == nil || vc.work.IsClosed() {
		conn, err := s.Dial(vhost, "apply")
		if err != nil {
			return nil, nil, err
		}
		vc.work, vc.idle = conn, nil
	}
	ch, err := vc.work.Channel()
	if err != nil {
		return nil, nil, amqpError(s.display, err)
	}
	return vc, ch, nil
}

func (vc *vhostConn) put(ch *amqp.Channel) {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	if !ch.IsClosed() {
		vc.idle = append(vc.idle, ch)
	}
}

// withChannel runs one synchronous AMQP method on a pooled channel of
// vhost. The broker answers an error by closing the channel, so a channel
// only returns to the pool after success. The timeout closes the channel,
// which is the only way to abandon a call in amqp091.
func (s *Session) withChannel(ctx context.Context, vhost string, fn func(*amqp.Channel) error) error {
	if err := ctx.Err(); err != nil {
		return &Error{Kind: ErrTimeout, Msg: "interrupted", Err: err}
	}
	vc, ch, err := s.channel(vhost)
	if err != nil {
		return err
	}
	opCtx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	stop := context.AfterFunc(opCtx, func() { ch.Close() })
	err = fn(ch)
	if !stop() {
		if ctx.Err() != nil {
			return &Error{Kind: ErrTimeout, Msg: "interrupted", Err: ctx.Err()}
		}
		return &Error{Kind: ErrTimeout, Msg: fmt.Sprintf("AMQP at %s did not answer within %s (--timeout)", s.display, s.timeout)}
	}
	if err != nil {
		ch.Close()
		return amqpError(s.display, err)
	}
	vc.put(ch)
	return nil
}

// DeclareExchange declares e; an identical exchange is success, a
// different one ErrInequivalent.
func (s *Session) DeclareExchange(ctx context.Context, e topology.Exchange) error {
	if s.HTTPWrites {
		return s.Client.DeclareExchange(ctx, e)
	}
	return s.withChannel(ctx, e.Vhost, func(ch *amqp.Channel) error {
		return ch.ExchangeDeclare(e.Name, e.Type, e.Durable, e.AutoDelete, e.Internal, false, table(e.Arguments))
	})
}

// DeclareQueue declares q; an identical queue is success, a different one
// ErrInequivalent.
func (s *Session) DeclareQueue(ctx context.Context, q topology.Queue) error {
	if s.HTTPWrites {
		return s.Client.DeclareQueue(ctx, q)
	}
	return s.withChannel(ctx, q.Vhost, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(q.Name, q.Durable, q.AutoDelete, false, false, table(q.Arguments))
		return err
	})
}

// Bind creates b; an existing identical binding is success.
func (s *Session) Bind(ctx context.Context, b topology.Binding) error {
	if s.HTTPWrites {
		return s.Client.Bind(ctx, b)
	}
	return s.withChannel(ctx, b.Vhost, func(ch *amqp.Channel) error {
		if b.DestinationType == topology.DestExchange {
			return ch.ExchangeBind(b.Destination, b.RoutingKey, b.Source, false, table(b.Arguments))
		}
		return ch.QueueBind(b.Destination, b.RoutingKey, b.Source, false, table(b.Arguments))
	})
}

// Unbind deletes b; a missing binding, source or destination is success.
func (s *Session) Unbind(ctx context.Context, b topology.Binding) error {
	if s.HTTPWrites {
		return s.Client.Unbind(ctx, b)
	}
	return ignoreNotFound(s.withChannel(ctx, b.Vhost, func(ch *amqp.Channel) error {
		if b.DestinationType == topology.DestExchange {
			return ch.ExchangeUnbind(b.Destination, b.RoutingKey, b.Source, false, table(b.Arguments))
		}
		return ch.QueueUnbind(b.Destination, b.RoutingKey, b.Source, table(b.Arguments))
	}))
}

// DeleteExchange deletes an exchange with its bindings; a missing one is
// success.
func (s *Session) DeleteExchange(ctx context.Context, vhost, name string) error {
	if s.HTTPWrites {
		return s.Client.DeleteExchange(ctx, vhost, name)
	}
	return ignoreNotFound(s.withChannel(ctx, vhost, func(ch *amqp.Channel) error {
		return ch.ExchangeDelete(name, false, false)
	}))
}

// DeleteQueue deletes q; a missing queue is success. With ifEmpty a queue
// holding ready messages is kept and the error is ErrNotEmpty. Classic
// queues check that atomically in the broker. Quorum queues refuse
// if-empty (a connection error on 3.x), so their count is taken with a
// passive declare, which is exact, immediately before the delete: a
// message published in the milliseconds between the two is lost. As with
// RabbitMQ's own if-empty, deliveries not yet acknowledged do not count.
func (s *Session) DeleteQueue(ctx context.Context, q topology.Queue, ifEmpty bool) error {
	if s.HTTPWrites {
		return s.Client.DeleteQueue(ctx, q, ifEmpty)
	}
	if ifEmpty && q.QueueType() != "classic" {
		var n int
		err := s.withChannel(ctx, q.Vhost, func(ch *amqp.Channel) error {
			st, err := ch.QueueDeclarePassive(q.Name, false, false, false, false, nil)
			n = st.Messages
			return err
		})
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if n > 0 {
			return &Error{Kind: ErrNotEmpty, Msg: fmt.Sprintf("the queue holds %d messages", n)}
		}
		ifEmpty = false
	}
	return ignoreNotFound(s.withChannel(ctx, q.Vhost, func(ch *amqp.Channel) error {
		_, err := ch.QueueDelete(q.Name, false, ifEmpty, false)
		return err
	}))
}

// QueueDepth returns the exact number of ready messages in a queue, read
// with a passive declare.
func (s *Session) QueueDepth(ctx context.Context, vhost, name string) (int, error) {
	var n int
	err := s.withChannel(ctx, vhost, func(ch *amqp.Channel) error {
		st, err := ch.QueueDeclarePassive(name, false, false, false, false, nil)
		n = st.Messages
		return err
	})
	return n, err
}

// table converts arguments for amqp091, which takes nested tables only as
// amqp.Table.
func table(a topology.Args) amqp.Table {
	if len(a) == 0 {
		return nil
	}
	t := make(amqp.Table, len(a))
	for k, v := range a {
		t[k] = tableValue(v)
	}
	return t
}

func tableValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return table(x)
	case topology.Args:
		return table(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = tableValue(e)
		}
		return out
	}
	return v
}
