package broker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/apply/target"
)

// Kinds of broker failure. Every error this package returns for a failed
// call is an *Error whose Kind is one of these, so callers branch with
// errors.Is(err, broker.ErrNotEmpty) and never on message text.
var (
	// ErrAuth: the broker rejected the credentials.
	ErrAuth = errors.New("authentication failed")
	// ErrPermission: the user lacks a tag or a vhost permission.
	ErrPermission = errors.New("permission denied")
	// ErrNotFound: the object does not exist.
	ErrNotFound = errors.New("not found")
	// ErrVhostNotFound: the vhost does not exist (target's kind: apply
	// skips locking it).
	ErrVhostNotFound = target.ErrVhostNotFound
	// ErrInequivalent: an object of that name exists with other
	// properties or arguments (406 PRECONDITION_FAILED, or HTTP 400).
	ErrInequivalent = errors.New("inequivalent object")
	// ErrNotEmpty: a guarded queue delete found messages in the queue
	// (target's kind: apply explains it).
	ErrNotEmpty = target.ErrNotEmpty
	// ErrLocked: another connection holds an exclusive queue, which is how
	// another rmqtopo apply holds a vhost's lock (target's kind: apply
	// waits for it).
	ErrLocked = target.ErrLocked
	// ErrRefused: the broker refused the request for another reason
	// (HTTP 400, AMQP 406 other than the above).
	ErrRefused = errors.New("refused by the broker")
	// ErrNodeDown: the cluster node that holds the object is down (AMQP
	// 404 "is down or inaccessible"); the call succeeds once it is back.
	ErrNodeDown = errors.New("cluster node down")
	// ErrServer: the broker failed (HTTP 5xx, AMQP 541).
	ErrServer = errors.New("broker error")
	// ErrUnreachable: no connection could be made.
	ErrUnreachable = errors.New("broker unreachable")
	// ErrTimeout: the broker did not answer within the timeout.
	ErrTimeout = errors.New("timeout")
	// ErrNotRabbitMQ: the server at the management URL is not RabbitMQ's
	// management API.
	ErrNotRabbitMQ = errors.New("not a RabbitMQ management API")
)

// Error is one failed call, described in one line that never contains
// credentials.
type Error struct {
	Kind error
	// Status is the HTTP status or AMQP reply code; 0 when no answer came.
	Status int
	// Msg is the whole message.
	Msg string
	// Holder, for ErrLocked, names the connection that holds the lock, as
	// the broker's statistics name it; empty when they do not yet.
	Holder string
	Err    error
}

func (e *Error) Error() string { return e.Msg }

// Unwrap exposes both the kind and the cause to errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// OneLine keeps a message on one line, its whitespace collapsed and its
// length bounded: every error becomes one line of "rmqtopo: ..." output.
func OneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 600 {
		n := 600
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n] + "…"
	}
	return s
}

// httpError classifies an HTTP answer >= 400. The management API answers
// {"error": ..., "reason": ...}, and 401 for missing permissions too. A
// refused login is error "not_authorized" (with a z) in every release,
// with reason "Login failed" up to 3.12 and "Not_Authorized" since;
// a missing tag or permission is "not_authorised" (with an s) with the
// reason (rabbit_mgmt_util.erl in 3.10, rabbit_web_dispatch_access_control.erl
// in 3.13 and 4.x: not_authenticated against not_authorised).
func (c *Client) httpError(status int, code, reason string) error {
	code, reason = OneLine(code), OneLine(reason)
	e := &Error{Status: status}
	switch {
	case status == 401 && (code == "not_authorized" || reason == "Login failed" || reason == "Not_Authorized" || reason == "" || code == ""):
		e.Kind = ErrAuth
		e.Msg = fmt.Sprintf("authentication failed for user %q at %s (HTTP 401)", c.user, c.display)
	case status == 401 || status == 403:
		e.Kind = ErrPermission
		e.Msg = fmt.Sprintf("permission denied for user %q: %s (HTTP %d)", c.user, reason, status)
		if strings.Contains(reason, "administrator") {
			e.Msg += "; see \"Least privilege\" in docs/plan-apply.md for the tags and permissions each command needs"
		}
	case status == 404 && code == "not_found" && reason == "Not Found":
		// RabbitMQ 4.3 answers a request on a vhost the user has no
		// permissions on with this 404, not 401 "User not authorised to
		// access virtual host" as 3.10 and 4.0 do, so as not to tell that
		// the vhost exists; a missing vhost or object is "Object Not Found"
		// in every release (rabbit_web_dispatch_access_control:
		// user_matches_vhost/2 in 4.3.6; live probes of 3.10.8, 4.0.5 and
		// 4.3.6).
		e.Kind = ErrPermission
		e.Msg = fmt.Sprintf("permission denied for user %q: User not authorised to access virtual host (HTTP 404: the broker hides a vhost from a user without permission on it)", c.user)
	case reason == "vhost_not_found" || strings.Contains(reason, "no_such_vhost"):
		e.Kind = ErrVhostNotFound
		e.Msg = fmt.Sprintf("vhost not found (HTTP %d)", status)
	case status == 404:
		e.Kind = ErrNotFound
		e.Msg = "not found (HTTP 404)"
	case strings.Contains(reason, "inequivalent arg") || strings.Contains(reason, "inequivalent"):
		e.Kind = ErrInequivalent
		e.Msg = fmt.Sprintf("the broker refused: %s (HTTP %d)", reason, status)
	case strings.HasSuffix(reason, "not empty"):
		e.Kind = ErrNotEmpty
		e.Msg = fmt.Sprintf("the broker refused: %s (HTTP %d)", reason, status)
	case status >= 500:
		e.Kind = ErrServer
		e.Msg = fmt.Sprintf("the management API at %s failed with HTTP %d: %s", c.display, status, strings.TrimPrefix(code+": "+reason, ": "))
	default:
		e.Kind = ErrRefused
		if reason == "" {
			reason = code
		}
		e.Msg = fmt.Sprintf("the broker refused: %s (HTTP %d)", reason, status)
	}
	return e
}

// transportError classifies a failure to get any HTTP answer. The message
// names the management URL without credentials; the cause is reduced to
// its innermost error because net/http's *url.Error repeats the URL.
func transportError(display string, timeout string, f Flags, ctx context.Context, err error) error {
	e := &Error{Kind: ErrUnreachable, Err: err}
	var ue *url.Error
	inner := err
	if errors.As(err, &ue) {
		inner = ue.Err
	}
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var recordErr tls.RecordHeaderError
	switch {
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		e.Kind = ErrTimeout
		e.Msg = "interrupted"
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || isTimeout(err):
		e.Kind = ErrTimeout
		e.Msg = fmt.Sprintf("the management API at %s did not answer within %s%s", display, timeout, hint(" (%s)", f.Timeout))
	case errors.Is(err, syscall.ECONNREFUSED):
		e.Msg = fmt.Sprintf("cannot connect to the management API at %s: connection refused — is the management plugin enabled?", display)
	case errors.As(err, &dnsErr):
		e.Msg = fmt.Sprintf("cannot connect to the management API at %s: no such host %q", display, dnsErr.Name)
	case errors.As(err, &certErr), errors.As(err, &unknownAuth), errors.As(err, &hostErr):
		e.Msg = fmt.Sprintf("TLS with the management API at %s failed: %s%s", display, OneLine(inner.Error()), hint(" (see %s)", f.CACert))
	case answeredAMQP(inner):
		return httpAtAMQP(display, f, err)
	case errors.As(err, &recordErr):
		e.Msg = fmt.Sprintf("TLS with the management API at %s failed: the server does not speak TLS (use http://)", display)
	default:
		e.Msg = fmt.Sprintf("cannot reach the management API at %s: %s", display, OneLine(inner.Error()))
	}
	return e
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// amqpError classifies an AMQP failure. The broker's text looks like
// "PRECONDITION_FAILED - inequivalent arg ..."; the part after the code
// name is what people need.
func amqpError(display string, err error) error {
	var ae *amqp.Error
	// amqp091 reports a connection or channel it found closed (the
	// connection was lost, or the broker closed it earlier) as an
	// *amqp.Error of its own, not sent by the broker: that is a lost
	// connection, not a refusal.
	if errors.Is(err, amqp.ErrClosed) || (errors.As(err, &ae) && !ae.Server && ae.Code == amqp.ChannelError) {
		return &Error{Kind: ErrUnreachable, Msg: fmt.Sprintf("the AMQP connection to %s was lost (%s)", display, OneLine(err.Error())), Err: err}
	}
	if !errors.As(err, &ae) {
		return &Error{Kind: ErrUnreachable, Msg: fmt.Sprintf("AMQP to %s: %s", display, OneLine(err.Error())), Err: err}
	}
	reason := ae.Reason
	if _, after, ok := strings.Cut(reason, " - "); ok {
		reason = after
	}
	reason = OneLine(reason)
	e := &Error{Status: ae.Code, Err: err}
	switch ae.Code {
	case amqp.AccessRefused:
		e.Kind = ErrPermission
		e.Msg = fmt.Sprintf("permission denied: %s (AMQP 403)", reason)
	case amqp.NotFound:
		e.Kind = ErrNotFound
		if strings.Contains(reason, "is down or inaccessible") {
			// A cluster node holding the queue is down: the queue exists,
			// and the same call succeeds once the node is back.
			e.Kind = ErrNodeDown
		}
		e.Msg = fmt.Sprintf("not found: %s (AMQP 404)", reason)
	case amqp.ResourceLocked:
		e.Kind = ErrLocked
		e.Msg = fmt.Sprintf("locked: %s (AMQP 405)", reason)
	case amqp.PreconditionFailed:
		switch {
		case strings.Contains(reason, "inequivalent"):
			e.Kind = ErrInequivalent
		case strings.HasSuffix(reason, "not empty"):
			e.Kind = ErrNotEmpty
		default:
			e.Kind = ErrRefused
		}
		e.Msg = fmt.Sprintf("the broker refused: %s (AMQP 406)", reason)
	case amqp.NotAllowed:
		if strings.Contains(reason, "vhost") && strings.Contains(reason, "not found") {
			e.Kind = ErrVhostNotFound
			e.Msg = fmt.Sprintf("vhost not found (AMQP 530)")
			break
		}
		e.Kind = ErrPermission
		e.Msg = fmt.Sprintf("not allowed: %s (AMQP 530)", reason)
	case amqp.InternalError, amqp.ConnectionForced:
		e.Kind = ErrServer
		e.Msg = fmt.Sprintf("the broker failed: %s (AMQP %d)", reason, ae.Code)
	default:
		e.Kind = ErrRefused
		e.Msg = fmt.Sprintf("the broker refused: %s (AMQP %d)", reason, ae.Code)
	}
	return e
}

// dialError classifies a failed AMQP dial of user to vhost at display (a
// URL without credentials); timeout is the dial's bound.
func dialError(display, user, vhost string, timeout time.Duration, f Flags, err error) error {
	var ae *amqp.Error
	switch {
	case errors.As(err, &ae) && ae.Code == amqp.AccessRefused:
		return &Error{Kind: ErrAuth, Status: ae.Code, Err: err,
			Msg: fmt.Sprintf("AMQP authentication failed for user %q at %s (AMQP 403)", user, display)}
	case errors.As(err, &ae) && ae.Code == amqp.NotAllowed && strings.Contains(ae.Reason, "vhost") && strings.Contains(ae.Reason, "not found"):
		return &Error{Kind: ErrVhostNotFound, Status: ae.Code, Err: err,
			Msg: fmt.Sprintf("vhost %q not found (AMQP 530)", vhost)}
	case errors.As(err, &ae) && !ae.Server && ae.Code == amqp.FrameError && strings.Contains(ae.Reason, "i/o timeout"):
		// amqp091 reports a handshake the broker never answered as a
		// frame error of its own. Seen on a 3.10 node whose file handle
		// cache was used up (10,000 quorum queues, docs/operations.md):
		// it takes the TCP connection, then waits for a handle for ever.
		return &Error{Kind: ErrTimeout, Err: err, Msg: fmt.Sprintf(
			"AMQP at %s accepted the connection but did not answer its handshake within %s%s: the node is overloaded or out of file handles (see docs/operations.md, \"Open files\")", display, timeout, hint(" (%s)", f.Timeout))}
	case errors.As(err, &ae):
		return amqpError(display, err)
	case errors.Is(err, syscall.ECONNREFUSED):
		return &Error{Kind: ErrUnreachable, Err: err,
			Msg: fmt.Sprintf("cannot connect to AMQP at %s: connection refused%s", display, hint(" (set %s)", f.AMQPURL))}
	case isTimeout(err):
		return &Error{Kind: ErrTimeout, Err: err, Msg: fmt.Sprintf("AMQP at %s did not answer within %s%s", display, timeout, hint(" (%s)", f.Timeout))}
	}
	msg := err.Error()
	if strings.Contains(msg, "Exception (501)") || strings.Contains(msg, "EOF") {
		// The broker closes the socket without a reason when the
		// handshake fails, e.g. for a user without access to the vhost.
		return &Error{Kind: ErrPermission, Err: err,
			Msg: fmt.Sprintf("AMQP at %s closed the connection during the handshake (wrong credentials, or no access to the vhost?)", display)}
	}
	return &Error{Kind: ErrUnreachable, Err: err, Msg: fmt.Sprintf("cannot connect to AMQP at %s: %s", display, OneLine(msg))}
}
