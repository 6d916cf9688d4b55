package broker

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// A lost connection is said to be one, not "the broker refused".
func TestLostConnectionIsNotARefusal(t *testing.T) {
	err := amqpError("amqp://rabbit:5672", fmt.Errorf("declare: %w", amqp.ErrClosed))
	if !errors.Is(err, ErrUnreachable) || strings.Contains(err.Error(), "refused") ||
		!strings.Contains(err.Error(), "the AMQP connection to amqp://rabbit:5672 was lost") {
		t.Errorf("err = %v (%T)", err, err)
	}
	refusal := amqpError("amqp://rabbit:5672", &amqp.Error{Code: amqp.PreconditionFailed, Reason: "PRECONDITION_FAILED - inequivalent arg", Server: true})
	if !errors.Is(refusal, ErrInequivalent) {
		t.Errorf("refusal = %v", refusal)
	}
}

// Long messages are cut on a UTF-8 boundary.
func TestOneLineCutsOnARuneBoundary(t *testing.T) {
	s := OneLine(strings.Repeat("é", 400))
	if !strings.HasSuffix(s, "…") || strings.ContainsRune(s, '\uFFFD') || len(s) > 604 {
		t.Errorf("OneLine cut badly: %d bytes, suffix %q", len(s), s[len(s)-8:])
	}
	if !strings.HasPrefix(s, "éé") || strings.Count(s, "é") != 300 {
		t.Errorf("OneLine kept %d runes", strings.Count(s, "é"))
	}
}

// TestHandshakeTimeoutIsATimeout: a broker that accepts the TCP connection
// and never answers the handshake is a timeout that says so, not a
// refusal or a credentials problem.
func TestHandshakeTimeoutIsATimeout(t *testing.T) {
	err := dialError("amqp://127.0.0.1:5672/", "guest", "v", 30*time.Second, Flags{},
		&amqp.Error{Code: amqp.FrameError, Reason: "read tcp 127.0.0.1:1->127.0.0.1:5672: i/o timeout"})
	var e *Error
	if !errors.As(err, &e) || e.Kind != ErrTimeout || !strings.Contains(e.Msg, "did not answer its handshake within 30s") {
		t.Fatalf("dialError = %#v, want ErrTimeout about the handshake", err)
	}
}
