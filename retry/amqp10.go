package retry

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"time"

	amqp10 "github.com/Azure/go-amqp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
)

// AMQP 1.0, for queues of the native layout (RabbitMQ 4.3.1+): their
// schedule is in their arguments, which only AMQP 1.0's management node
// tells a client, and a retry held until a time of the client's choosing
// is AMQP 1.0's modified outcome. The helper opens an AMQP 1.0 connection
// to the node and vhost its AMQP 0.9.1 connection reached, with the login
// and TLS configuration DialURL or DialURLs dialed it with: a service's
// API does not change.

// settleTimeout bounds the wait for the broker's answer to an AMQP 1.0
// disposition or management request.
const settleTimeout = 30 * time.Second

// login is how a Dialer of this package dialed a connection: amqp091
// keeps no password in the connection it returns (it zeroes it once
// connected), so the AMQP 1.0 connection beside it needs it from the
// dial. It lives only as long as the Consume session that asked for it
// (see withLoginSink): no package variable holds one, and nothing but
// that session's Retrier can reach it.
type login struct {
	user, pass string
	tls        *tls.Config // nil for a plain connection
	// dialed: a dialer of this package filled it.
	dialed bool
}

// loginOf is the login amqp091 dials url with, given config: the URL's
// user and password, or config's PLAIN mechanism; TLS for amqps, with
// config's TLS configuration if it has one.
func loginOf(url string, config amqp.Config) login {
	l := login{dialed: true}
	if u, err := amqp.ParseURI(url); err == nil {
		l.user, l.pass = u.Username, u.Password
		if u.Scheme == "amqps" {
			l.tls = &tls.Config{ServerName: u.Host, MinVersion: tls.VersionTLS12}
		}
	}
	for _, a := range config.SASL {
		if p, ok := a.(*amqp.PlainAuth); ok {
			l.user, l.pass = p.Username, p.Password
			break
		}
	}
	if config.TLSClientConfig != nil {
		l.tls = config.TLSClientConfig.Clone()
	}
	return l
}

// loginSink is the context key under which a Consume session asks the
// dialer it was handed for the login of the connection it dials. The
// type is unexported: no other package can read the value.
type loginSink struct{}

// withLoginSink returns ctx asking a Dialer of this package for the login
// of the connection it makes, and where that login will be: nil fields
// until a DialURL or DialURLs dialer fills them.
func withLoginSink(ctx context.Context) (context.Context, *login) {
	l := &login{}
	return context.WithValue(ctx, loginSink{}, l), l
}

// dialWithLogin dials url with config and, if ctx asks (withLoginSink),
// hands the login it dialed with to the session that asked.
func dialWithLogin(ctx context.Context, url string, config amqp.Config) (*amqp.Connection, error) {
	l := loginOf(url, config)
	conn, err := amqp.DialConfig(url, config)
	if err != nil {
		return nil, err
	}
	if sink, ok := ctx.Value(loginSink{}).(*login); ok {
		*sink = l
	}
	return conn, nil
}

// errNoLogin: the AMQP 1.0 connection needs a login the helper was not
// given.
var errNoLogin = errors.New("the AMQP 1.0 connection needs the login of the AMQP 0.9.1 one, which only Consume with a dialer of retry.DialURL or retry.DialURLs knows")

// dial10 opens an AMQP 1.0 connection beside conn with l, the login conn
// was dialed with; nil (retry.New, or a dialer of the service's own)
// fails.
func dial10(ctx context.Context, conn *amqp.Connection, l *login) (*amqp10.Conn, error) {
	if l == nil || !l.dialed {
		return nil, errNoLogin
	}
	opts := &amqp10.ConnOptions{HostName: "vhost:" + conn.Config.Vhost, SASLType: amqp10.SASLTypePlain(l.user, l.pass)}
	scheme := "amqp://"
	if l.tls != nil {
		scheme, opts.TLSConfig = "amqps://", l.tls.Clone()
	}
	c, err := amqp10.Dial(ctx, scheme+conn.RemoteAddr().String(), opts)
	if err != nil {
		return nil, fmt.Errorf("opening an AMQP 1.0 connection: %w", err)
	}
	return c, nil
}

// queueAddress is the AMQP 1.0 address of a queue, and the management
// node's path of it.
func queueAddress(queue string) string { return "/queues/" + url.PathEscape(queue) }

// queueArguments asks the broker's management node for queue's arguments
// (GET /queues/{queue}). found is false for a queue that does not exist.
func queueArguments(ctx context.Context, c *amqp10.Conn, queue string) (args map[string]any, found bool, err error) {
	v, found, err := manage(ctx, c, queueAddress(queue))
	if err != nil || !found {
		return nil, found, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false, fmt.Errorf("the management node answered GET %s with %T, not a map", queueAddress(queue), v)
	}
	args, _ = m["arguments"].(map[string]any)
	return args, true, nil
}

// manage sends GET path to the management node and returns the body of
// its answer; found is false when it answers 404.
func manage(ctx context.Context, c *amqp10.Conn, path string) (v any, found bool, err error) {
	// The broker refuses a request that arrives before the reply link's
	// credit, which go-amqp sends in the background after the attach: wait
	// a little (RabbitMQ's own Go client waits 10 ms), more if it refused.
	for _, pause := range []time.Duration{10 * time.Millisecond, 100 * time.Millisecond, 500 * time.Millisecond} {
		v, found, err = ask(ctx, c, path, pause)
		var e *amqp10.Error
		if err == nil || !errors.As(err, &e) || e.Condition != amqp10.ErrCondPreconditionFailed {
			return v, found, err
		}
	}
	return v, found, err
}

// ask sends GET path to the management node, pause after attaching its
// link pair.
func ask(ctx context.Context, c *amqp10.Conn, path string, pause time.Duration) (v any, found bool, err error) {
	s, err := c.NewSession(ctx, nil)
	if err != nil {
		return nil, false, err
	}
	defer s.Close(context.WithoutCancel(ctx))
	paired := map[string]any{"paired": true}
	const node, link = "/management", "management-link-pair"
	snd, err := s.NewSender(ctx, node, &amqp10.SenderOptions{Name: link, Properties: paired, SourceAddress: node,
		SettlementMode: amqp10.SenderSettleModeSettled.Ptr(), RequestedReceiverSettleMode: amqp10.ReceiverSettleModeFirst.Ptr()})
	if err != nil {
		return nil, false, err
	}
	rcv, err := s.NewReceiver(ctx, node, &amqp10.ReceiverOptions{Name: link, Properties: paired, TargetAddress: node,
		SettlementMode: amqp10.ReceiverSettleModeFirst.Ptr(), RequestedSenderSettleMode: amqp10.SenderSettleModeSettled.Ptr(), Credit: 1})
	if err != nil {
		return nil, false, err
	}
	time.Sleep(pause)
	id, to, get, me := "rmqtopo-retry-"+strconv.FormatInt(time.Now().UnixNano(), 36), path, "GET", "$me"
	req := &amqp10.Message{Value: amqp10.Null{}, Properties: &amqp10.MessageProperties{MessageID: id, To: &to, Subject: &get, ReplyTo: &me}}
	if err := snd.Send(ctx, req, &amqp10.SendOptions{Settled: true}); err != nil {
		return nil, false, err
	}
	res, err := rcv.Receive(ctx, nil)
	if err != nil {
		return nil, false, err
	}
	code := ""
	if res.Properties != nil && res.Properties.Subject != nil {
		code = *res.Properties.Subject
	}
	switch code {
	case "404":
		return nil, false, nil
	case "200":
		return res.Value, true, nil
	}
	return nil, false, fmt.Errorf("the management node answered %q to GET %s", code, to)
}

// readNative returns queue's native schedule, nil if it is not a native
// queue (or the broker speaks no AMQP 1.0: before RabbitMQ 4.0 it does
// not on the AMQP port). apart says the schedule came from the queue's
// schedule binding (contract's in-place shape), so it may change while the
// helper runs (see refreshSchedule).
func readNative(conn *amqp.Connection, l *login, queue string) (n *contract.Native, apart bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	c, err := dial10(ctx, conn, l)
	if err != nil {
		return nil, false, err
	}
	defer c.Close()
	args, found, err := queueArguments(ctx, c, queue)
	if err != nil || !found {
		return nil, false, err
	}
	got, err := contract.ParseNative(args)
	switch {
	case errors.Is(err, contract.ErrNotNative):
		return nil, false, nil
	case errors.Is(err, contract.ErrScheduleApart):
		s, err := schedule(ctx, c, queue, nil)
		if err != nil {
			return nil, true, err
		}
		// The binding shape keeps the modified route whatever the delays.
		n, err := contract.RouteOfArguments(args, *s)
		if err != nil {
			return nil, true, fmt.Errorf("queue %q: %w", queue, err)
		}
		return &n, true, nil
	case err != nil:
		return nil, false, fmt.Errorf("queue %q: %w", queue, err)
	}
	return &got, false, nil
}

// schedule reads queue's schedule from its binding from the schedule
// exchange (GET /bindings?src=..&dstq=..&key=..). During a change the
// plan adds the new binding before it deletes the old one: of two, it
// keeps cur, the schedule it has, where it is one of them.
func schedule(ctx context.Context, c *amqp10.Conn, queue string, cur *contract.Native) (*contract.Native, error) {
	q := url.Values{"src": {contract.ScheduleExchange}, "dstq": {queue}, "key": {queue}}
	v, _, err := manage(ctx, c, "/bindings?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("reading the schedule binding of queue %q: %w", queue, err)
	}
	list, _ := v.([]any)
	var found []contract.Native
	for _, b := range list {
		m, _ := b.(map[string]any)
		args, _ := m["arguments"].(map[string]any)
		n, err := contract.ParseSchedule(args)
		if err != nil {
			return nil, fmt.Errorf("queue %q: %w", queue, err)
		}
		if cur != nil && sameSchedule(n, *cur) {
			return cur, nil
		}
		found = append(found, n)
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("queue %q is native but has no binding from %q carrying its schedule: run `rmqtopo apply` with its spec", queue, contract.ScheduleExchange)
	}
	return &found[0], nil
}

// sameSchedule reports whether a and b are the same schedule. The route
// is left out: a binding's is read from its delays, and a session on the
// modified route (the binding shape's, or one that followed a change)
// keeps its own.
func sameSchedule(a, b contract.Native) bool {
	return a.Jitter == b.Jitter && a.DeliveryLimit == b.DeliveryLimit && slices.Equal(a.Delays, b.Delays)
}
