package main

import (
	"strings"
	"testing"
	"time"

	"github.com/rmqtopo/rmqtopo/internal/broker"
)

// TestOnlineLockTimeout: with --lock-timeout, apply waits for another
// apply's lock instead of failing, and applies once it is released; a
// timeout that runs out fails as a held lock does, with what it waited.
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

	_, stderr, code := rmqtopo(t, "", append([]string{"apply", "--auto-approve", "--lock-timeout", "1s", path}, o.conn()...)...)
	if code != 1 || !strings.Contains(stderr, "rmqtopo: apply: waited 1s (--lock-timeout): another rmqtopo apply holds the lock") {
		t.Errorf("lock held past the timeout: exit %d, stderr %q", code, stderr)
	}

	release := 2 * time.Second
	time.AfterFunc(release, func() { holder.Close() })
	start := time.Now()
	stdout, stderr, code := rmqtopo(t, "", append([]string{"apply", "--auto-approve", "--lock-timeout", "30s", path}, o.conn()...)...)
	took := time.Since(start)
	if code != 0 || !strings.Contains(stdout, "Apply complete") || took < release {
		t.Errorf("lock released after %s: exit %d after %s\nstdout:\n%s\nstderr:\n%s", release, code, took, stdout, stderr)
	}
	if want := "waiting up to 30s for another apply's lock on vhost"; !strings.Contains(stderr, want) {
		t.Errorf("stderr %q does not say %q", stderr, want)
	}
	t.Logf("apply waited %s for a lock released after %s", took.Round(time.Millisecond), release)
	o.must(t, 0, "plan", "--detailed-exitcode", path)
}
