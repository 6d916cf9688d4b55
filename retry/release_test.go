package retry_test

import (
	"strings"
	"testing"

	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/rabbitmq"
	"github.com/rmqtopo/rmqtopo/retry"
)

// TestNoNativeQueueBelowItsRelease (issue 45, point 2): the helper asks
// the release profile of the broker it is connected to (the version its
// AMQP server properties announce, the management API's too) whether a
// queue without a retry exchange can be native; on a release that cannot
// delay retries inside a queue New says so, naming the release, and still
// points to rmqtopo apply; on one that can, it says nothing of the release.
func TestNoNativeQueueBelowItsRelease(t *testing.T) {
	t.Parallel()
	b := brokertest.Get(t)
	conn := b.Dial(t, b.NewVhost(t))
	announced, _ := conn.Properties["version"].(string)
	if announced != b.Version(t) {
		t.Fatalf("the AMQP server properties announce version %q, the management API %q", announced, b.Version(t))
	}
	p, err := rabbitmq.ProfileOf(announced)
	if err != nil {
		t.Fatal(err)
	}
	r, err := retry.New(conn, workQueue, retry.WithLogger(testLogger(t)))
	if err == nil {
		r.Close()
		t.Fatal("New succeeded on a vhost without a topology")
	}
	msg := err.Error()
	if !strings.Contains(msg, `exchange "work.retry"`) || !strings.Contains(msg, "rmqtopo apply") {
		t.Errorf("New: %q; want the missing exchange named, and rmqtopo apply", msg)
	}
	says := "RabbitMQ " + announced + " delays no retries inside a queue; the native layout needs " + rabbitmq.First(rabbitmq.Profile.NativeDelayedRetry).String()
	if got := strings.Contains(msg, says); got == p.NativeDelayedRetry() {
		t.Errorf("RabbitMQ %s (%s, native %t): New said %q; want %q in it: %t", announced, p, p.NativeDelayedRetry(), msg, says, !p.NativeDelayedRetry())
	}
}
