package main

import (
	"bytes"
	"context"
	"strconv"
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
	errw := &notifyWriter{want: "waiting up to " + lockTimeout + " (--lock-timeout) for the lock on vhost", seen: make(chan struct{})}
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
	if want := "waiting up to " + lockTimeout + " (--lock-timeout) for the lock on vhost " + strconv.Quote(o.vhost) + ", held by "; !strings.Contains(errw.String(), want) {
		t.Errorf("stderr %q does not say %q", errw, want)
	}
	o.must(t, 0, "plan", "--detailed-exitcode", path)
}

// TestOnlineLockWaitProgress (issue 43, point 2): while apply waits for a
// lock held by another connection, its progress line names the lock, its
// holder (once the broker's statistics do) and how long it has waited,
// never the planning phase, which comes after the lock. The lock is
// released once the line names the holder.
func TestOnlineLockWaitProgress(t *testing.T) {
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
	// A guard, not a goal: the line comes after two ticks of a second.
	lockTimeout := waitguard.For(30 * time.Second).String()
	errw := &notifyWriter{want: "apply: waiting for the lock on vhost " + strconv.Quote(o.vhost) + ", held by brokertest " + t.Name() + ", connection ", seen: make(chan struct{})}
	go func() { <-errw.seen; holder.Close() }()
	var stdout bytes.Buffer
	err = run(context.Background(), append([]string{"apply", "--auto-approve", "--lock-timeout", lockTimeout, path}, o.conn()...),
		strings.NewReader(""), &stdout, errw)
	if code := exitCode(err, errw); code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, errw)
	}
	waited, _, _ := strings.Cut(errw.String(), errw.want)
	if strings.Contains(waited, "apply: reading the broker") {
		t.Errorf("a planning line while apply waited for the lock:\n%s", errw)
	}
	if !strings.Contains(errw.String(), ", up to "+lockTimeout+" (") {
		t.Errorf("the wait's line does not say how long it may last:\n%s", errw)
	}
}
