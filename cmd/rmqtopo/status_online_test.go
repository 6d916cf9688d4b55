package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/status"
	"github.com/rmqtopo/rmqtopo/topology"
)

// TestOnlineStatusShowsDrainingWaitQueues: after a delay change, the
// retired wait queue still holds 3 retries; plan keeps it (info RT004),
// and status lists it with its count and the flag, counts its messages
// in the summary, and still finds no drift.
func TestOnlineStatusShowsDrainingWaitQueues(t *testing.T) {
	t.Parallel()
	o := newOnline(t)
	path := o.spec(t, "s.yaml", "queues:\n  - {name: work, retry: {delays: [10m]}}\n")
	o.must(t, 0, "apply", "--auto-approve", path)
	conn := o.b.Dial(t, o.vhost)
	for i := 0; i < 3; i++ {
		brokertest.PublishConfirmed(t, conn, "", "rmqtopo.wait.10m", amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(fmt.Sprint(i))})
	}
	o.waitCounts(t, "rmqtopo.wait.10m", "counted 3 messages", func(c waitCounts) bool { return c.Messages == 3 })
	path = o.spec(t, "s.yaml", "queues:\n  - {name: work, retry: {delays: [1m]}}\n")
	o.must(t, 0, "apply", "--auto-approve", path)
	if out := o.must(t, 0, "plan", path); !strings.Contains(out, "RT004") {
		t.Fatalf("plan does not keep the retired wait queue draining:\n%s", out)
	}

	var st status.Report
	if err := json.Unmarshal([]byte(o.must(t, 0, "status", path, "-f", "json")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Draining) != 1 {
		t.Fatalf("draining %+v, want rmqtopo.wait.10m", st.Draining)
	}
	d := st.Draining[0]
	if d.Vhost != o.vhost || d.Name != "rmqtopo.wait.10m" || d.Messages != 3 || d.Delay != "10m" || len(d.Flags) != 1 || d.Flags[0] != status.FlagDraining {
		t.Errorf("draining %+v", d)
	}
	if s := st.Summary; s.RetiredDraining != 1 || s.RetiredMessages != 3 || s.DriftedObjects != 0 {
		t.Errorf("summary %+v", s)
	}
	out := o.must(t, 0, "status", path)
	for _, want := range []string{"retired wait queues draining (vhost " + o.vhost + ")", "rmqtopo.wait.10m", "3 messages draining in 1 retired wait queue, no drift"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
}

// TestOnlineStatusShowsRetriesDelayedInQueue: on RabbitMQ 4.3, a quorum
// queue with delayed retry holds rejected deliveries back inside itself;
// status shows them per queue (messages_delayed, the DELAYED column) and
// counts them in the summary. Brokers before 4.3 have no such count: the
// column is absent there.
func TestOnlineStatusShowsRetriesDelayedInQueue(t *testing.T) {
	t.Parallel()
	o := newOnline(t)
	v, err := topology.ParseVersion(o.b.Version(t))
	if err != nil {
		t.Fatal(err)
	}
	if !v.AtLeast(4, 3) {
		// The delayed-retry arguments are refused (RT011) before 4.3.
		path := o.spec(t, "quorum.yaml", "queues:\n  - {name: orders, raw: true, type: quorum}\n")
		o.must(t, 0, "apply", "--auto-approve", path)
		if out := o.must(t, 0, "status", path); strings.Contains(out, "DELAYED") {
			t.Errorf("RabbitMQ %s counts no delayed messages, yet status has the column:\n%s", v, out)
		}
		return
	}
	path := o.spec(t, "native.yaml", "queues:\n  - {name: orders, raw: true, type: quorum, arguments: {x-delayed-retry-type: failed, x-delayed-retry-min: 600000}}\n")
	o.must(t, 0, "apply", "--auto-approve", path)
	conn := o.b.Dial(t, o.vhost)
	for i := 0; i < 5; i++ {
		brokertest.PublishConfirmed(t, conn, "", "orders", amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(fmt.Sprint(i))})
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	// Reject 3 of the 5 with requeue: the queue delays each by 10 min.
	for i := 0; i < 3; i++ {
		d, ok, err := ch.Get("orders", false)
		if err != nil || !ok {
			t.Fatalf("get %d: ok %v, %v", i, ok, err)
		}
		if err := d.Reject(true); err != nil {
			t.Fatal(err)
		}
	}
	o.waitCounts(t, "orders", "counted 3 delayed", func(c waitCounts) bool { return c.Delayed != nil && *c.Delayed == 3 && c.Ready == 2 })

	var st status.Report
	if err := json.Unmarshal([]byte(o.must(t, 0, "status", path, "-f", "json")), &st); err != nil {
		t.Fatal(err)
	}
	row := st.Queues[0].Queues[0]
	if row.Name != "orders" || row.Delayed == nil || *row.Delayed != 3 || row.Ready != 2 || row.Messages != 5 || st.Summary.RetriesDelayed != 3 {
		t.Errorf("RabbitMQ %s: row %+v, summary %+v", v, row, st.Summary)
	}
	out := o.must(t, 0, "status", path)
	for _, want := range []string{"DELAYED", "3 retries delayed inside work queues"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
}
