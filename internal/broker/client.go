// Package broker is rmqtopo's connection to a live RabbitMQ: it reads a
// vhost's state in bulk into a topology.Topology, records which objects
// rmqtopo owns, holds the apply lock, and carries out the changes of a plan.
//
// Reads use the management API, after GET /api/overview has confirmed
// the server is RabbitMQ: a constant number of calls per vhost whatever
// its size, one GET /api/definitions/{vhost} (whose exchanges carry the
// ownership records, one per spec), or four listings for a user who may
// not export definitions. Message and consumer counts are read only for
// the queues whose fate depends on them, exactly, by AMQP passive
// declares. Writes of exchanges, queues and bindings go over AMQP, on a
// connection pool of the apply, because the management API costs several
// times more broker CPU per object (see docs/benchmarks.md); vhosts,
// policies and the ownership records go over HTTP (a record can exceed an
// AMQP frame).
//
// Every failure is an *Error of one line, classified by Kind (ErrAuth,
// ErrInequivalent, ErrNotEmpty, ...), and never contains credentials.
package broker

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultURL is the management API of a broker on this machine.
const DefaultURL = "http://127.0.0.1:15672"

// DefaultTimeout bounds every call to the broker.
const DefaultTimeout = 30 * time.Second

// Config says how to reach a broker.
type Config struct {
	// URL is the management API's base URL, e.g. http://127.0.0.1:15672.
	// Userinfo in it is used when User is empty.
	URL string
	// AMQPURL is the AMQP URL used for the apply lock and for writes, with
	// or without a vhost path (it is replaced). Empty derives it from URL's
	// host, the broker's AMQP listener port and the same credentials.
	AMQPURL        string
	User, Password string
	// TLS configures https:// and amqps:// connections; nil uses the
	// system's roots.
	TLS *tls.Config
	// Timeout bounds every call; 0 is DefaultTimeout.
	Timeout time.Duration
	// Flags names the caller's settings that errors point to.
	Flags Flags
	// OnWait, if set, is told of each call that waits for the broker (a
	// management API request, an AMQP connection being opened), named for
	// people; the end it returns is called once the call is over. The
	// CLI's progress line names a slow broker with it.
	OnWait func(what string) (end func())
}

// Client talks to the management API. It is safe for concurrent use and
// keeps connections alive, which the rabbit-hole client does not (it sets
// Request.Close on every request and takes no context).
type Client struct {
	base    *url.URL // no userinfo, no trailing slash
	display string   // base as shown in messages
	user    string
	pass    string
	hc      *http.Client
	timeout time.Duration
	cfg     Config
	// certAsked is set once the management API asked for a client
	// certificate that the client does not have.
	certAsked *atomic.Bool
	// exportRefused is set once the broker refused the user a definitions
	// export (not an administrator): reads list instead (see vhostDoc).
	exportRefused *atomic.Bool
	// forceExport reads from the export whatever the release: set by
	// tests only, which hold the two ways of reading to one answer.
	forceExport bool

	serverMu sync.Mutex
	version  string // the RabbitMQ version, once Server has confirmed it
}

// NewClient checks cfg and returns a client; it does not contact the broker.
func NewClient(cfg Config) (*Client, error) {
	if cfg.URL == "" {
		cfg.URL = DefaultURL
	}
	u, err := url.Parse(strings.TrimRight(cfg.URL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("management URL %q: want http://HOST:PORT or https://HOST:PORT", redactURLString(cfg.URL))
	}
	if u.User != nil {
		if cfg.User == "" {
			cfg.User = u.User.Username()
		}
		if p, ok := u.User.Password(); ok && cfg.Password == "" {
			cfg.Password = p
		}
		u.User = nil
	}
	if cfg.User == "" {
		cfg.User = "guest"
		if cfg.Password == "" {
			cfg.Password = "guest"
		}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// An apply keeps up to its concurrency of requests in flight; idle
	// connections beyond the default 2 per host would be closed and
	// re-opened for every request.
	tr.MaxIdleConnsPerHost = 64
	// A copy: cfg.TLS is also the AMQP dials' (see connTLS).
	tc, certAsked := connTLS(cfg.TLS, u.Scheme == "https")
	tr.TLSClientConfig = tc
	return &Client{
		base:    u,
		display: u.String(),
		user:    cfg.User,
		pass:    cfg.Password,
		hc:      &http.Client{Transport: tr},
		timeout: cfg.Timeout,
		cfg:     cfg,

		certAsked:     certAsked,
		exportRefused: new(atomic.Bool),
	}, nil
}

// URL is the management API's URL as shown to people: no credentials.
func (c *Client) URL() string { return c.display }

// User is the user the client authenticates as.
func (c *Client) User() string { return c.user }

// Secrets returns the strings that must never appear in output, for
// callers that scrub errors from other libraries: the password, and the
// one of Config.AMQPURL if it has its own.
func (c *Client) Secrets() []string {
	out := secretForms(c.pass, c.user)
	if u, err := url.Parse(c.cfg.AMQPURL); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok {
			out = append(out, secretForms(p, u.User.Username())...)
		}
	}
	return out
}

// secretForms lists a password as it may appear in text. A password equal
// to the user name, such as guest's, is left out: messages name the user,
// and scrubbing the name would garble them without hiding anything; so is
// one of under 4 characters, which would match all over any message.
func secretForms(pass, user string) []string {
	if len(pass) < 4 || pass == user {
		return nil
	}
	return []string{pass, url.QueryEscape(pass), url.PathEscape(pass)}
}

func redactURLString(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparseable URL)"
	}
	return u.Redacted()
}

// esc escapes one path segment: "/" (the default vhost) becomes %2F, as
// the management API expects.
func esc(s string) string { return url.PathEscape(s) }

// do performs one call. path starts with /api/ and has its segments
// escaped; body, if not nil, is sent as JSON; out, if not nil, receives the
// JSON answer. ok404 turns a 404 into success (for idempotent deletes).
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	_, err := c.doStatus(ctx, method, path, query, body, out)
	return err
}

func (c *Client) doStatus(ctx context.Context, method, path string, query url.Values, body, out any) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	u := c.display + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, fmt.Errorf("build request %s %s: %w", method, path, err)
	}
	req.SetBasicAuth(c.user, c.pass)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if method == http.MethodPut {
		// A PUT of the management API declares or sets an object: sent
		// twice, it changes nothing more. Marked idempotent (a key with
		// no value, which is not sent), net/http sends it again on a new
		// connection when the broker closed a kept-alive one as it was
		// reused (an EOF, seen on 4.0.5 in CI).
		req.Header["Idempotency-Key"] = nil
	}
	end := c.waiting(func() string { return fmt.Sprintf("the management API at %s to answer %s %s", c.display, method, path) })
	resp, err := c.hc.Do(req)
	end()
	if err != nil && c.certAsked.Load() {
		if e := missingClientCert("the management API", c.display, c.cfg.Flags, err); e != nil {
			return 0, e
		}
	}
	if err != nil {
		return 0, transportError(c.display, c.timeout.String(), c.cfg.Flags, ctx, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, transportError(c.display, c.timeout.String(), c.cfg.Flags, ctx, err)
	}
	return resp.StatusCode, c.answer(resp.StatusCode, data, method, path, out)
}

// answer decodes the body data of an answer with status into out (nil:
// ignored; a *[]byte gets it raw), or makes the error of a status >= 400.
func (c *Client) answer(status int, data []byte, method, path string, out any) error {
	if status >= 400 {
		var e struct {
			Error  string `json:"error"`
			Reason string `json:"reason"`
		}
		if json.Unmarshal(data, &e) != nil {
			e.Reason = strings.TrimSpace(string(data))
		}
		return c.httpError(status, e.Error, e.Reason)
	}
	if out == nil || len(data) == 0 {
		return nil
	}
	if raw, ok := out.(*[]byte); ok {
		*raw = data
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode answer of %s %s: %w", method, path, err)
	}
	return nil
}

// waiting tells Config.OnWait of a call that waits for the broker, named
// by what (made only when someone listens), and returns its end.
func (c *Client) waiting(what func() string) (end func()) {
	if c.cfg.OnWait == nil {
		return func() {}
	}
	if end := c.cfg.OnWait(what()); end != nil {
		return end
	}
	return func() {}
}

// GetJSON GETs path (starting with /api/, its segments escaped) with query
// and decodes the JSON answer into dst, with the client's transport,
// timeout and errors: a missing object is ErrNotFound (or
// ErrVhostNotFound), and every failure is an *Error of one line.
func (c *Client) GetJSON(ctx context.Context, path string, query url.Values, dst any) error {
	return c.do(ctx, http.MethodGet, path, query, nil, dst)
}

// ignoreNotFound makes deletes idempotent: deleting what is gone succeeds.
func ignoreNotFound(err error) error {
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// Overview is the part of GET /api/overview rmqtopo uses.
type Overview struct {
	RabbitMQVersion string `json:"rabbitmq_version"`
	Listeners       []struct {
		Protocol string `json:"protocol"`
		Port     int    `json:"port"`
	} `json:"listeners"`
}

// Overview reads the broker's version and listeners.
func (c *Client) Overview(ctx context.Context) (Overview, error) {
	var o Overview
	err := c.do(ctx, http.MethodGet, "/api/overview", url.Values{"columns": {"rabbitmq_version,listeners"}}, nil, &o)
	return o, err
}

// Server confirms, before anything else is asked of it, that the server
// at the management URL is RabbitMQ's management API, and returns the
// RabbitMQ version it reports. Anything else, a web server answering 404
// or a page that is not JSON, is ErrNotRabbitMQ: never "an empty broker".
// The answer is kept for the client's life.
func (c *Client) Server(ctx context.Context) (string, error) {
	c.serverMu.Lock()
	defer c.serverMu.Unlock()
	if c.version != "" {
		return c.version, nil
	}
	var o struct {
		Version     string `json:"rabbitmq_version"`
		ProductName string `json:"product_name"`
	}
	err := c.do(ctx, http.MethodGet, "/api/overview", url.Values{"columns": {"rabbitmq_version,product_name"}}, nil, &o)
	var be *Error
	switch {
	// A refused login or a missing tag is RabbitMQ's own answer, and an
	// AMQP port answering is named already: said as they are.
	case err != nil && errors.As(err, &be) && (be.Kind == ErrAuth || be.Kind == ErrPermission || be.Kind == ErrUnreachable || be.Kind == ErrTimeout || be.Kind == ErrNotRabbitMQ):
		return "", err
	case err != nil:
		return "", &Error{Kind: ErrNotRabbitMQ, Err: err,
			Msg: fmt.Sprintf("the server at %s is not a RabbitMQ management API: GET /api/overview: %s", c.display, OneLine(err.Error()))}
	case o.Version == "":
		return "", &Error{Kind: ErrNotRabbitMQ,
			Msg: fmt.Sprintf("the server at %s is not a RabbitMQ management API: GET /api/overview reports no rabbitmq_version", c.display)}
	}
	c.version = o.Version
	return o.Version, nil
}

// AMQPURL returns the AMQP URL to use: Config.AMQPURL if set, else one
// built from the management URL's host, the broker's AMQP listener (amqps
// when the management API is https and the broker listens for it) and the
// same credentials.
func (c *Client) AMQPURL(ctx context.Context) (string, error) {
	if c.cfg.AMQPURL != "" {
		u, err := url.Parse(c.cfg.AMQPURL)
		if err != nil || (u.Scheme != "amqp" && u.Scheme != "amqps") {
			return "", fmt.Errorf("AMQP URL %q: want amqp://HOST:PORT/ or amqps://HOST:PORT/", redactURLString(c.cfg.AMQPURL))
		}
		if u.User == nil {
			u.User = url.UserPassword(c.user, c.pass)
		}
		return u.String(), nil
	}
	o, err := c.Overview(ctx)
	if err != nil {
		return "", fmt.Errorf("find the AMQP port: %w", err)
	}
	want, scheme := "amqp", "amqp"
	if c.base.Scheme == "https" {
		want, scheme = "amqp/ssl", "amqps"
	}
	for _, l := range o.Listeners {
		if l.Protocol == want {
			u := url.URL{Scheme: scheme, User: url.UserPassword(c.user, c.pass),
				Host: net.JoinHostPort(c.base.Hostname(), strconv.Itoa(l.Port)), Path: "/"}
			return u.String(), nil
		}
	}
	return "", fmt.Errorf("the broker at %s lists no %s listener%s", c.display, want, hint("; set %s", c.cfg.Flags.AMQPURL))
}
