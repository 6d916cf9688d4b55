package broker

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// dialFailure classifies a failed AMQP dial to u: a client certificate the
// broker asked for and did not get (certAsked), a broker certificate that
// does not verify, amqp:// aimed at a TLS port, a port that answered HTTP
// (answeredHTTP, or a probe after the peer closed the connection), or
// else what dialError makes of it.
func (s *Session) dialFailure(u *url.URL, vhost string, certAsked, answeredHTTP bool, err error) error {
	if answeredHTTP {
		return amqpAtHTTP(s.display, false, s.cfg.Flags, err)
	}
	if certAsked {
		if e := missingClientCert("AMQP", s.display, s.cfg.Flags, err); e != nil {
			return e
		}
	}
	var certErr *tls.CertificateVerificationError
	if errors.As(err, &certErr) {
		return &Error{Kind: ErrUnreachable, Err: err, Msg: fmt.Sprintf("TLS with AMQP at %s failed: %s%s",
			s.display, OneLine(innermost(err).Error()), hint(" (see %s)", s.cfg.Flags.CACert))}
	}
	var ae *amqp.Error
	if u.Scheme == "amqp" && !errors.Is(err, syscall.ECONNREFUSED) && !isTimeout(err) &&
		(!errors.As(err, &ae) || ae.Code == amqp.FrameError) && speaksTLS(u.Host, s.timeout) {
		return plainToTLS(s.display, s.cfg.Flags, err)
	}
	if closedEarly(err) && answersHTTP(u.Host, u.Scheme == "amqps", s.timeout) {
		return amqpAtHTTP(s.display, u.Scheme == "amqps", s.cfg.Flags, err)
	}
	return dialError(s.display, s.amqpUser(), vhost, s.timeout, s.cfg.Flags, err)
}

// connTLS returns the TLS configuration of one connection: a copy of base,
// never base itself, because amqp091-go writes the URL's host into the
// ServerName of the config it is given, and net/http takes ServerName from
// its transport's config: with one config shared, an AMQP dial to
// amqps://127.0.0.1 made the HTTP client verify the management API's
// certificate (for localhost) against 127.0.0.1. need says a config is
// wanted even when base is nil (amqps://, https://).
//
// When base has no client certificate, the copy answers a broker that asks
// for one with none, as Go does by default, and sets asked: over TLS 1.3
// the broker refuses the missing certificate only after the client's side
// of the handshake is done, racing the AMQP header, so what the dial
// reports is a reset or a closed connection as often as the alert. asked
// is set during the handshake, before any of those, and says what
// happened every time.
func connTLS(base *tls.Config, need bool) (cfg *tls.Config, asked *atomic.Bool) {
	asked = new(atomic.Bool)
	switch {
	case base != nil:
		cfg = base.Clone()
	case need:
		cfg = &tls.Config{}
	default:
		return nil, asked
	}
	if len(cfg.Certificates) == 0 && cfg.GetClientCertificate == nil {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			asked.Store(true)
			return &tls.Certificate{}, nil
		}
	}
	return cfg, asked
}

// missingClientCert is the error of a connection to a broker that asked
// for a client certificate when none was given, or nil when err is not how
// that refusal shows: a TLS alert, or the connection reset, closed or at
// EOF (AMQP 501 or amqp.ErrClosed, 504, when the refusal raced the AMQP
// header). A
// broker may ask without insisting (verify_peer without
// fail_if_no_peer_cert), so a refused connection, a timeout or an answer
// from the broker itself (AMQP 403, 530) is some other failure.
func missingClientCert(what, display string, f Flags, err error) error {
	// amqp091-go turns a failed read into a frame error (501) that keeps
	// only the cause's text.
	var ae *amqp.Error
	refused := remoteAlert(err) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, amqp.ErrClosed) || (errors.As(err, &ae) && ae.Code == amqp.FrameError)
	if !refused {
		return nil
	}
	return &Error{Kind: ErrAuth, Err: err, Msg: fmt.Sprintf(
		"TLS with %s at %s failed: the broker asked for a client certificate and none was given%s (%s)",
		what, display, hint("; set %s", strings.Join(slices.DeleteFunc([]string{f.ClientCert, f.ClientKey}, func(s string) bool { return s == "" }), " and ")),
		OneLine(innermost(err).Error()))}
}

// innermost is the cause of err with the wrappers that repeat the URL
// (net/http's *url.Error) or the address (*net.OpError) taken off.
func innermost(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		err = oe.Err
	}
	return err
}

// speaksTLS reports whether hostport answers a TLS handshake: it completes
// one, certificates unchecked, or the server answers with a TLS alert.
// It tells a plain amqp:// URL aimed at a TLS port, which the AMQP library
// reports as a frame error, from other handshake failures.
func speaksTLS(hostport string, timeout time.Duration) bool {
	if timeout > 3*time.Second {
		timeout = 3 * time.Second
	}
	d := &net.Dialer{Timeout: timeout}
	conn, err := tls.DialWithDialer(d, "tcp", hostport, &tls.Config{InsecureSkipVerify: true})
	if err == nil {
		conn.Close()
		return true
	}
	return remoteAlert(err)
}

// remoteAlert reports whether err is a TLS alert sent by the peer, which
// crypto/tls returns as a *net.OpError with Op "remote error" (its alert
// type is unexported; tls.AlertError is for QUIC).
func remoteAlert(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "remote error"
}

// plainToTLS is the error of amqp:// aimed at a port that speaks TLS.
func plainToTLS(display string, f Flags, err error) error {
	return &Error{Kind: ErrUnreachable, Err: err, Msg: fmt.Sprintf(
		"cannot connect to AMQP at %s: the port speaks TLS; use amqps://%s",
		display, hint(" (with %s if the broker's certificate is not signed by a system CA)", f.CACert))}

}
