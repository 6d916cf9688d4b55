package broker_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/rabbitmq"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

// TestDeliveryLimitChangeInPlace (issue 34, point 4): on the test's
// broker, whatever its release, a quorum work queue holding messages
// keeps them through a change of its delivery limit, made as a policy
// update: lowering on every release, raising too from 4.0 (expanded for
// 4.0+, the queue has no x-delivery-limit argument to cap it). The
// lowered limit then takes effect on the live queue: a message returned
// past it is dead-lettered into the DLQ.
func TestDeliveryLimitChangeInPlace(t *testing.T) {
	t.Parallel()
	l := newLive(t)
	v, err := l.c.Version(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	desired := func(limit string) topology.Topology {
		extra := ""
		if limit != "" {
			extra = ", delivery_limit: " + limit
		}
		return spec.ExpandFor(v, parseFor(t, "limit.yaml", []byte(fmt.Sprintf(
			"version: 1\nqueues:\n  - {name: work, type: quorum, dlq: true, retry: {delays: [1s]}%s}\n", extra)), l.vhost))
	}
	l.converge(t, desired(""), false)
	conn := l.b.Dial(t, l.vhost)
	defer conn.Close()
	for i := range 5 {
		brokertest.PublishConfirmed(t, conn, "", "work", amqp.Publishing{Body: []byte(fmt.Sprint(i)), DeliveryMode: amqp.Persistent})
	}
	steps := []string{"1"}
	if rabbitmq.ProfileFor(v).DefaultDeliveryLimit() > 0 {
		steps = []string{"50", "1"}
	}
	for _, limit := range steps {
		p, _ := l.plan(t, desired(limit), false)
		for _, c := range p.Changes {
			if c.Action != plan.NoOp && c.Address.Kind != topology.KindPolicy {
				t.Fatalf("RabbitMQ %s, delivery_limit %s: %s %s (%s), want only a policy update", v, limit, c.Action, c.Address, c.Reason())
			}
		}
		l.converge(t, desired(limit), false)
		if n := l.b.QueueDepth(t, l.vhost, "work"); n != 5 {
			t.Fatalf("RabbitMQ %s, delivery_limit %s: work holds %d messages, want the 5 it held", v, limit, n)
		}
	}
	// Limit 1: the first return counts one delivery, the second is past it.
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	for range 2 {
		d := getOne(t, ch, "work")
		if d.Body[0] != '0' {
			t.Fatalf("got message %q, want the head of the queue, 0", d.Body)
		}
		if err := d.Reject(true); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, waitguard.AtLeast(10*time.Second, time.Minute), "the message returned past delivery_limit 1 in work.dlq", func() bool {
		return l.b.QueueDepth(t, l.vhost, "work.dlq") == 1
	})
	if n := l.b.QueueDepth(t, l.vhost, "work"); n != 4 {
		t.Errorf("work holds %d messages, want 4", n)
	}
}

// getOne gets the head of queue, waiting for a requeued message to be
// back.
func getOne(t *testing.T, ch *amqp.Channel, queue string) amqp.Delivery {
	t.Helper()
	var d amqp.Delivery
	waitFor(t, waitguard.AtLeast(5*time.Second, 30*time.Second), "a message in "+queue, func() bool {
		got, ok, err := ch.Get(queue, false)
		if err != nil && !strings.Contains(err.Error(), "no messages") {
			t.Fatal(err)
		}
		d = got
		return ok
	})
	return d
}
