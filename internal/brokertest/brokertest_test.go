package brokertest_test

import (
	"os"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
)

func TestMain(m *testing.M) { brokertest.Main(m) }

// TestRoundTrip proves the harness against a real broker: a fresh vhost, a
// queue declared over AMQP, a confirmed publish, an exact depth, a drain,
// and the queue seen by the management API.
func TestRoundTrip(t *testing.T) {
	b := brokertest.Get(t)
	vhost := b.NewVhost(t)
	if !strings.HasPrefix(vhost, "t-TestRoundTrip-") {
		t.Errorf("vhost name %q", vhost)
	}

	conn := b.Dial(t, vhost)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	const queue = "work"
	if _, err := ch.QueueDeclare(queue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatalf("declare: %v", err)
	}
	ch.Close()

	brokertest.PublishConfirmed(t, conn, "", queue, amqp.Publishing{
		ContentType:  "text/plain",
		DeliveryMode: amqp.Persistent,
		Body:         []byte("hello"),
	})
	if got := b.QueueDepth(t, vhost, queue); got != 1 {
		t.Fatalf("QueueDepth = %d, want 1", got)
	}

	// A guard: one message is there already.
	ds := brokertest.Drain(t, conn, queue, 1, waitguard.For(100*time.Millisecond))
	if string(ds[0].Body) != "hello" {
		t.Errorf("body = %q, want hello", ds[0].Body)
	}
	if got := b.QueueDepth(t, vhost, queue); got != 0 {
		t.Errorf("QueueDepth after drain = %d, want 0", got)
	}

	qs, err := b.Mgmt(t).ListQueuesIn(vhost)
	if err != nil {
		t.Fatalf("ListQueuesIn: %v", err)
	}
	if len(qs) != 1 || qs[0].Name != queue || qs[0].Vhost != vhost {
		t.Errorf("management API lists %+v, want queue %q in %q", qs, queue, vhost)
	}
}

func TestAMQPURLFor(t *testing.T) {
	b := &brokertest.Broker{AMQPURL: "amqp://x:y@127.0.0.1:5680/?heartbeat=5", User: "u", Password: "p w"}
	for vhost, want := range map[string]string{
		"/":       "amqp://u:p%20w@127.0.0.1:5680/%2F?heartbeat=5",
		"":        "amqp://u:p%20w@127.0.0.1:5680/%2F?heartbeat=5",
		"t-a/b c": "amqp://u:p%20w@127.0.0.1:5680/t-a%2Fb%20c?heartbeat=5",
	} {
		if got := b.AMQPURLFor(vhost); got != want {
			t.Errorf("AMQPURLFor(%q) = %q, want %q", vhost, got, want)
		}
	}
}

// TestRunsTheAskedRelease: the node the tests run on is the RabbitMQ
// series RMQTOPO_TEST_RABBITMQ asks for (make test sets it), and a node in
// a private root leaves no mount behind in the host's mount table.
func TestRunsTheAskedRelease(t *testing.T) {
	b := brokertest.Get(t)
	series := os.Getenv(brokertest.EnvRabbitMQ)
	if series == "" && b.Node == nil {
		t.Skip("an external broker, and no " + brokertest.EnvRabbitMQ + " naming its series")
	}
	r, err := brokertest.ReleaseFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Version(t); !strings.HasPrefix(got, r.Series+".") {
		t.Errorf("broker runs RabbitMQ %s, want series %s", got, r.Series)
	}
	if b.Node == nil || b.Node.Root == "" {
		return
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mounts), b.Node.Root) {
		t.Errorf("the host's mount table holds the node's root %s:\n%s", b.Node.Root, mounts)
	}
}

func TestLookupRelease(t *testing.T) {
	for _, s := range []string{"3.10", "4.0", "4.3"} {
		if r, err := brokertest.LookupRelease(s); err != nil || r.Series != s {
			t.Errorf("LookupRelease(%q) = %+v, %v", s, r, err)
		}
	}
	if _, err := brokertest.LookupRelease("3.13"); err == nil || !strings.Contains(err.Error(), "3.10, 4.0, 4.3") {
		t.Errorf("LookupRelease(3.13) = %v, want an error listing the series", err)
	}
}
