package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/definitions"
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
	// MigrateHook, if set, is called after each step of MigrateQueue with
	// the queue, the step (StepTemp...) and, during a move, the messages
	// moved so far. The CLI reports progress with it; tests interrupt a
	// migration there.
	MigrateHook func(queue, step string, moved int)

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
	tc, certAsked := connTLS(s.cfg.TLS, u.Scheme == "amqps")
	conn, err := amqp.DialConfig(u.String(), amqp.Config{
		Heartbeat:       10 * time.Second,
		Locale:          "en_US",
		Properties:      props,
		TLSClientConfig: tc,
		Dial:            amqp.DefaultDial(s.timeout),
	})
	if err != nil {
		return nil, s.dialFailure(&u, vhost, certAsked.Load(), err)
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
		_ = CloseConn(conn)
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
		return ch.ExchangeDeclare(e.Name, e.Type, e.Durable, e.AutoDelete, e.Internal, false, AMQPTable(e.Arguments))
	})
}

// DeclareQueue declares q; an identical queue is success, a different one
// ErrInequivalent.
func (s *Session) DeclareQueue(ctx context.Context, q topology.Queue) error {
	if s.HTTPWrites {
		return s.Client.DeclareQueue(ctx, q)
	}
	return s.withChannel(ctx, q.Vhost, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(q.Name, q.Durable, q.AutoDelete, false, false, AMQPTable(definitions.DeclareArgs(q)))
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
			return ch.ExchangeBind(b.Destination, b.RoutingKey, b.Source, false, AMQPTable(b.Arguments))
		}
		return ch.QueueBind(b.Destination, b.RoutingKey, b.Source, false, AMQPTable(b.Arguments))
	})
}

// Unbind deletes b; a missing binding, source or destination is success.
func (s *Session) Unbind(ctx context.Context, b topology.Binding) error {
	if s.HTTPWrites {
		return s.Client.Unbind(ctx, b)
	}
	return ignoreNotFound(s.withChannel(ctx, b.Vhost, func(ch *amqp.Channel) error {
		if b.DestinationType == topology.DestExchange {
			return ch.ExchangeUnbind(b.Destination, b.RoutingKey, b.Source, false, AMQPTable(b.Arguments))
		}
		return ch.QueueUnbind(b.Destination, b.RoutingKey, b.Source, AMQPTable(b.Arguments))
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

// DeleteQueue deletes q; a missing queue is success. With ifEmpty (apply
// without --allow-destroy) a queue that may hold messages is kept and the
// error is ErrNotEmpty.
//
// Classic queues are checked atomically by the broker's if-empty (ready
// messages only, as RabbitMQ defines it). Quorum and other non-classic
// queues refuse if-empty (a connection error on 3.x), so for them the
// guard is done here, in four steps:
//
//  1. Every binding to the queue except the default exchange's (which
//     cannot be removed) is removed, read in one call from the management
//     API, so that nothing routed through an exchange, dead-lettering
//     through a dead-letter exchange included, can arrive any more.
//  2. A passive declare reads the exact count of ready messages and of
//     consumers. Any message refuses; so does any consumer, because a
//     consumer may hold deliveries not yet acknowledged, which the count
//     leaves out and the delete would drop.
//  3. The bindings are listed again: one that another client added since
//     step 1 refuses too.
//  4. The queue is deleted.
//
// A refusal, or any failure before the delete completes, re-creates the
// bindings removed in step 1 before returning, so a refused apply leaves
// routing as it found it; a failure to restore them is part of the error
// and names them. They are re-created from the management API's JSON:
// same source, routing key and argument values, but an argument of an
// AMQP type that JSON does not carry comes back as the type the API maps
// its JSON value to: a 32-bit integer becomes a 64-bit one. Headers
// matching compares values, so routing is unchanged; the bindings rmqtopo
// itself creates round-trip exactly. A replace re-creates its desired bindings later in the same
// apply anyway (see apply's phases).
//
// What the guard cannot see, and a delete can still lose:
//   - a message published straight to the queue by name through the
//     default exchange between the count (step 2) and the delete (step 4),
//     by a client or by another queue dead-lettering to it with
//     x-dead-letter-exchange "" and its name as routing key: the default
//     exchange's binding cannot be removed;
//   - a message the broker routed through a binding just before step 1
//     that was still on its way to the queue's leader when it was counted;
//   - a binding added after step 3, and what it routes before the delete;
//   - deliveries not yet acknowledged on a channel with no consumer on the
//     queue any more: fetched with basic.get, or left by a cancelled
//     consumer whose channel is still open.
func (s *Session) DeleteQueue(ctx context.Context, q topology.Queue, ifEmpty bool) error {
	if ifEmpty && q.QueueType() != "classic" {
		return s.deleteQueueGuarded(ctx, q)
	}
	return s.deleteQueue(ctx, q, ifEmpty)
}

// deleteQueue deletes q with or without the broker's if-empty; a missing
// queue is success.
func (s *Session) deleteQueue(ctx context.Context, q topology.Queue, ifEmpty bool) error {
	if s.HTTPWrites {
		return s.Client.DeleteQueue(ctx, q, ifEmpty)
	}
	return ignoreNotFound(s.withChannel(ctx, q.Vhost, func(ch *amqp.Channel) error {
		_, err := ch.QueueDelete(q.Name, false, ifEmpty, false)
		return err
	}))
}

// queueBinding is a binding to a queue as GET
// /api/queues/{vhost}/{name}/bindings reports it. Arguments are kept as
// the broker wrote them, so that a restore re-creates the same binding.
type queueBinding struct {
	Source        string          `json:"source"`
	RoutingKey    string          `json:"routing_key"`
	Arguments     json.RawMessage `json:"arguments"`
	PropertiesKey string          `json:"properties_key"`
}

func (b queueBinding) String() string {
	return fmt.Sprintf("%q -> key %q arguments %s", b.Source, b.RoutingKey, b.args())
}

func (b queueBinding) args() json.RawMessage {
	if len(b.Arguments) == 0 || string(b.Arguments) == "null" || string(b.Arguments) == "[]" {
		return json.RawMessage("{}")
	}
	return b.Arguments
}

// queueBindings lists the bindings to q that can be removed: all but the
// default exchange's. A missing queue is ErrNotFound.
func (s *Session) queueBindings(ctx context.Context, q topology.Queue) ([]queueBinding, error) {
	var all []queueBinding
	if err := s.do(ctx, http.MethodGet, "/api/queues/"+esc(q.Vhost)+"/"+esc(q.Name)+"/bindings", nil, nil, &all); err != nil {
		return nil, err
	}
	out := all[:0]
	for _, b := range all {
		if b.Source != "" {
			out = append(out, b)
		}
	}
	return out, nil
}

func queueBindingPath(q topology.Queue, b queueBinding) string {
	return "/api/bindings/" + esc(q.Vhost) + "/e/" + esc(b.Source) + "/q/" + esc(q.Name)
}

// deleteQueueGuarded is DeleteQueue's guard for non-classic queues.
func (s *Session) deleteQueueGuarded(ctx context.Context, q topology.Queue) error {
	bindings, err := s.queueBindings(ctx, q)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list the bindings of queue %q: %w", q.Name, err)
	}
	var cut []queueBinding
	for _, b := range bindings {
		if err := ignoreNotFound(s.do(ctx, http.MethodDelete, queueBindingPath(q, b)+"/"+esc(b.PropertiesKey), nil, nil, nil)); err != nil {
			return s.restoreBindings(ctx, q, cut, fmt.Errorf("unbind %s from queue %q: %w", b, q.Name, err))
		}
		cut = append(cut, b)
	}

	var st amqp.Queue
	err = s.withChannel(ctx, q.Vhost, func(ch *amqp.Channel) error {
		var err error
		st, err = ch.QueueDeclarePassive(q.Name, false, false, false, false, nil)
		if err == nil && st.Messages == 0 && st.Consumers == 0 {
			err = confirmEmpty(ch, q)
		}
		return err
	})
	switch {
	case errors.Is(err, ErrNotFound):
		return nil // deleted by someone else, with its bindings
	case err != nil:
		return s.restoreBindings(ctx, q, cut, err)
	case st.Consumers > 0:
		return s.restoreBindings(ctx, q, cut, &Error{Kind: ErrNotEmpty, Msg: fmt.Sprintf(
			"queue %q has %d consumers, which may hold unacknowledged deliveries; stop them or re-run with --allow-destroy", q.Name, st.Consumers)})
	case st.Messages > 0:
		return s.restoreBindings(ctx, q, cut, &Error{Kind: ErrNotEmpty, Msg: fmt.Sprintf(
			"queue %q holds %d messages", q.Name, st.Messages)})
	}

	again, err := s.queueBindings(ctx, q)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil
	case err != nil:
		return s.restoreBindings(ctx, q, cut, fmt.Errorf("list the bindings of queue %q: %w", q.Name, err))
	case len(again) > 0:
		return s.restoreBindings(ctx, q, cut, &Error{Kind: ErrNotEmpty, Msg: fmt.Sprintf(
			"queue %q was bound again (%s) by another client while rmqtopo checked it was empty; stop that client or re-run with --allow-destroy", q.Name, again[0])})
	}

	if err := s.deleteQueue(ctx, q, false); err != nil {
		return s.restoreBindings(ctx, q, cut, err)
	}
	return nil
}

// confirmEmpty asks a quorum queue that the broker counted empty for a
// message with basic.get, and returns ErrNotEmpty if it has one. RabbitMQ
// 3.10 answers a passive declare of a quorum queue with 0 messages and 0
// consumers when the queue's leader does not answer within 250 ms, or
// fails (rabbit_quorum_queue:stat/2), so a busy or re-electing queue
// counts empty; basic.get goes through the queue's log and says
// get-empty only when it is. A message got is given back at once (a
// quorum queue counts that as one delivery of it). Other types' counts
// are exact, and they are left alone.
func confirmEmpty(ch *amqp.Channel, q topology.Queue) error {
	if q.QueueType() != "quorum" {
		return nil
	}
	d, ok, err := ch.Get(q.Name, false)
	if err != nil || !ok {
		return err
	}
	if err := d.Nack(false, true); err != nil {
		return err
	}
	return &Error{Kind: ErrNotEmpty, Msg: fmt.Sprintf(
		"queue %q holds messages, though the broker counted none (a quorum queue whose leader is busy or being elected counts 0)", q.Name)}
}

// restoreBindings re-creates the bindings the guard removed from q and
// returns cause, with the bindings it could not restore named in it. It
// runs even when ctx is done, so that an interrupt does not leave the
// queue cut off; a missing queue or exchange ends a restore quietly.
func (s *Session) restoreBindings(ctx context.Context, q topology.Queue, cut []queueBinding, cause error) error {
	ctx = context.WithoutCancel(ctx)
	var failed []string
	var first error
	for _, b := range cut {
		err := ignoreNotFound(s.do(ctx, http.MethodPost, queueBindingPath(q, b), nil,
			map[string]any{"routing_key": b.RoutingKey, "arguments": b.args()}, nil))
		if err != nil {
			failed = append(failed, b.String())
			if first == nil {
				first = err
			}
		}
	}
	if len(failed) == 0 {
		return cause
	}
	return fmt.Errorf("%w; and restoring %d of the bindings removed from queue %q failed (%v), re-create them: %s",
		cause, len(failed), q.Name, first, strings.Join(failed, "; "))
}

// AMQPTable converts topology arguments for amqp091, which takes nested
// tables only as amqp.Table. Tests that declare topologies over AMQP use it
// too, so they send exactly what apply sends.
func AMQPTable(a topology.Args) amqp.Table {
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
		return AMQPTable(x)
	case topology.Args:
		return AMQPTable(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = tableValue(e)
		}
		return out
	}
	return v
}
