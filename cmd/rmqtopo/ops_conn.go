package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/broker"
)

// opsConn is a broker as the operations commands use it: the management
// API for bulk listings (ops.API) and one AMQP connection per vhost for
// moves. It takes its settings from connFlags, like plan and apply.
//
// broker.Client exports no generic GET and broker.Session no plain dial,
// so the HTTP and AMQP calls are made here, with the same one-line error
// style; the live topology for drift comes from broker.Client.Read.
type opsConn struct {
	client *broker.Client
	cfg    broker.Config
	hc     *http.Client
	base   string // management URL without credentials
}

func (f *connFlags) ops(e *env) (*opsConn, error) {
	cfg, err := f.config(e)
	if err != nil {
		return nil, err
	}
	client, err := broker.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	// NewClient resolved the user and password; read them back through a
	// config that matches.
	if cfg.User == "" {
		u, _ := url.Parse(cfg.URL)
		if u != nil && u.User != nil {
			cfg.User = u.User.Username()
			if p, ok := u.User.Password(); ok && cfg.Password == "" {
				cfg.Password = p
			}
		}
	}
	if cfg.User == "" {
		cfg.User, cfg.Password = "guest", "guest"
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg.TLS
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = broker.DefaultTimeout
	}
	cfg.Timeout = timeout
	return &opsConn{client: client, cfg: cfg, hc: &http.Client{Transport: tr}, base: client.URL()}, nil
}

// secrets are the strings no output may contain.
func (o *opsConn) secrets() []string {
	s := o.client.Secrets()
	if u, err := url.Parse(o.cfg.AMQPURL); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok && len(p) >= 4 && p != u.User.Username() {
			s = append(s, p, url.QueryEscape(p), url.PathEscape(p))
		}
	}
	return s
}

// GetJSON implements ops.API.
func (o *opsConn) GetJSON(ctx context.Context, path string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, o.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.base+path, nil)
	if err != nil {
		return fmt.Errorf("building a request: %w", err)
	}
	req.SetBasicAuth(o.cfg.User, o.cfg.Password)
	req.Header.Set("Accept", "application/json")
	resp, err := o.hc.Do(req)
	if err != nil {
		return o.transportError(ctx, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return o.transportError(ctx, err)
	}
	if resp.StatusCode >= 400 {
		var e struct{ Error, Reason string }
		if json.Unmarshal(data, &e) != nil {
			e.Reason = strings.TrimSpace(string(data))
		}
		return o.httpError(resp.StatusCode, e.Error, opsOneLine(e.Reason))
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decoding the answer of the management API: %w", err)
	}
	return nil
}

func opsOneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// errOpsNotFound marks a 404, which callers turn into "queue X not found".
var errOpsNotFound = errors.New("not found")

func (o *opsConn) httpError(status int, code, reason string) error {
	switch {
	case status == 401 && (reason == "Login failed" || reason == "" || code == ""):
		return fmt.Errorf("authentication failed for user %q at %s (HTTP 401)", o.cfg.User, o.base)
	case status == 401 || status == 403:
		return fmt.Errorf("permission denied for user %q: %s (HTTP %d)", o.cfg.User, reason, status)
	case status == 404:
		return fmt.Errorf("%w (HTTP 404)", errOpsNotFound)
	case status >= 500:
		return fmt.Errorf("the management API at %s failed with HTTP %d: %s", o.base, status, reason)
	}
	return fmt.Errorf("the broker refused: %s (HTTP %d)", reason, status)
}

func (o *opsConn) transportError(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, context.Canceled):
		return errors.New("interrupted")
	case errors.Is(err, context.DeadlineExceeded) || opsIsTimeout(err):
		return fmt.Errorf("the management API at %s did not answer within %s (--timeout)", o.base, o.cfg.Timeout)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("cannot connect to the management API at %s: connection refused — is the management plugin enabled?", o.base)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("cannot reach the management API at %s: %s", o.base, opsOneLine(err.Error()))
}

func opsIsTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// dial opens an AMQP connection to vhost.
func (o *opsConn) dial(ctx context.Context, vhost, purpose string) (*amqp.Connection, error) {
	raw, err := o.client.AMQPURL(ctx)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("AMQP URL: %w", err)
	}
	u.Path = "/" + vhost
	u.RawPath = "/" + url.PathEscape(vhost)
	display := (&url.URL{Scheme: u.Scheme, Host: u.Host}).String()
	user := o.cfg.User
	if u.User != nil {
		user = u.User.Username()
	}
	props := amqp.NewConnectionProperties()
	host, _ := os.Hostname()
	props.SetClientConnectionName(fmt.Sprintf("rmqtopo %s (pid %d on %s)", purpose, os.Getpid(), host))
	conn, err := amqp.DialConfig(u.String(), amqp.Config{
		Heartbeat:       10 * time.Second,
		Locale:          "en_US",
		Properties:      props,
		TLSClientConfig: o.cfg.TLS,
		Dial:            amqp.DefaultDial(o.cfg.Timeout),
	})
	if err == nil {
		return conn, nil
	}
	var ae *amqp.Error
	switch {
	case errors.As(err, &ae) && ae.Code == amqp.AccessRefused:
		return nil, fmt.Errorf("AMQP authentication failed for user %q at %s (AMQP 403)", user, display)
	case errors.As(err, &ae) && ae.Code == amqp.NotAllowed && strings.Contains(ae.Reason, "not found"):
		return nil, fmt.Errorf("vhost %q not found (AMQP 530)", vhost)
	case errors.As(err, &ae) && ae.Code == amqp.NotAllowed:
		return nil, fmt.Errorf("user %q may not access vhost %q: %s (AMQP 530)", user, vhost, opsOneLine(ae.Reason))
	case errors.Is(err, syscall.ECONNREFUSED):
		return nil, fmt.Errorf("cannot connect to AMQP at %s: connection refused (set --amqp-url)", display)
	case opsIsTimeout(err):
		return nil, fmt.Errorf("AMQP at %s did not answer within %s (--timeout)", display, o.cfg.Timeout)
	}
	return nil, fmt.Errorf("cannot connect to AMQP at %s: %s", display, opsOneLine(err.Error()))
}
