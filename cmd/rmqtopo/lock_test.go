package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
)

// TestOnlineLockTimeout: with --lock-timeout, apply waits for another
// apply's lock, a real one, instead of failing, and applies once it is
// released. How long it waits, and the timeout that runs out, are
// apply.Run's, tested there on a fake clock (apply/workflow_test.go).
func TestOnlineLockTimeout(t *testing.T) {
	t.Parallel()
	o := newOnline(t)
	path := o.spec(t, "small.yaml", smallSpec)
	holder := o.b.Dial(t, o.vhost)
	ch, err := holder.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(broker.LockQueue, false, true, true, false, nil); err != nil {
		t.Fatal(err)
	}

	// The lock is released once apply says it waits for it: read from its
	// stderr, not guessed from a clock, so a slow start cannot skip the wait.
	// The lock timeout is a guard: apply re-tries the lock 100 ms after
	// saying it waits, and a released lock is gone at once (0.4 s for the
	// whole apply on a loaded machine).
	lockTimeout := waitguard.For(time.Second).String()
	errw := &notifyWriter{want: "waiting up to " + lockTimeout + " for another apply's lock", seen: make(chan struct{})}
	released := make(chan struct{})
	go func() { <-errw.seen; close(released); holder.Close() }() // closed first: apply cannot finish before
	var stdout bytes.Buffer
	err = run(context.Background(), append([]string{"apply", "--auto-approve", "--lock-timeout", lockTimeout, path}, o.conn()...),
		strings.NewReader(""), &stdout, errw)
	code := exitCode(err, errw)
	select {
	case <-released:
	default:
		t.Errorf("apply returned before the lock was released: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), errw)
	}
	if code != 0 || !strings.Contains(stdout.String(), "Apply complete") {
		t.Errorf("lock released while apply waited: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), errw)
	}
	if want := "waiting up to " + lockTimeout + " for another apply's lock on vhost"; !strings.Contains(errw.String(), want) {
		t.Errorf("stderr %q does not say %q", errw, want)
	}
	o.must(t, 0, "plan", "--detailed-exitcode", path)
}
