package broker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rabbithole "github.com/michaelklishin/rabbit-hole/v2"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
)

// TestListQueues lists a vhost of more queues than one page holds, and
// reads a quorum queue's type, arguments, policy and counts back, as the
// operations commands use them.
func TestListQueues(t *testing.T) {
	t.Parallel()
	l := newLive(t)
	ctx := context.Background()
	conn := l.b.Dial(t, l.vhost)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	const classic = 501 // one more than a page
	want := []string{"dlq"}
	for i := 0; i < classic; i++ {
		name := fmt.Sprintf("q%03d", i)
		if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		want = append(want, name)
	}
	args := amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int64(5000)}
	if _, err := ch.QueueDeclare("dlq", true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	_, err = l.b.Mgmt(t).PutPolicy(l.vhost, "limit", rabbithole.Policy{
		Pattern: "^dlq$", ApplyTo: "queues", Definition: rabbithole.PolicyDefinition{"delivery-limit": 2000},
	})
	if err != nil {
		t.Fatal(err)
	}
	publish(t, conn, "", "dlq", nil, 3)

	queues, err := l.c.ListQueues(ctx, l.vhost)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, q := range queues {
		got = append(got, q.Name)
	}
	if diff := cmp.Diff(sorted(want), sorted(got)); diff != "" {
		t.Errorf("listed queues (-want +got):\n%s", diff)
	}

	// The policy applies, and the statistics count (every second on test
	// nodes, 5s by default), a little later.
	var dlq broker.QueueInfo
	waitFor(t, waitguard.For(statsWait), "the policy and the counts of dlq", func() bool {
		dlq, err = l.c.GetQueue(ctx, l.vhost, "dlq")
		if err != nil {
			t.Fatal(err)
		}
		return dlq.PolicyLimits["delivery-limit"] != nil && dlq.Messages == 3
	})
	if dlq.Type != "quorum" || dlq.Ready != 3 || dlq.Unacked != 0 || dlq.Consumers != 0 ||
		dlq.Arguments["x-delivery-limit"] != float64(5000) || !slices.Equal(dlq.DeliveryLimits(), []int64{5000, 2000}) {
		t.Errorf("dlq = %+v, want a quorum queue of 3 ready messages, delivery limits 5000 (argument) and 2000 (policy)", dlq)
	}
	if q := queues[slices.Index(got, "q000")]; q.Type != "classic" || q.DeadLettered != nil {
		t.Errorf("q000 listed as %+v, want a classic queue, without messages_dlx", q)
	}
	// A quorum queue reports messages_dlx, held dead-letters: none here.
	if dlq.DeadLettered == nil || *dlq.DeadLettered != 0 || dlq.DeadLettersHeld() != 0 {
		t.Errorf("dlq messages_dlx = %v, want 0", dlq.DeadLettered)
	}

	_, err = l.c.GetQueue(ctx, l.vhost, "missing")
	if !errors.Is(err, broker.ErrNotFound) || !strings.HasPrefix(err.Error(), `reading queue "missing" in vhost`) {
		t.Errorf("missing queue: %v", err)
	}
	_, err = l.c.ListQueues(ctx, l.vhost+"-missing")
	if !errors.Is(err, broker.ErrNotFound) && !errors.Is(err, broker.ErrVhostNotFound) {
		t.Errorf("missing vhost: %v", err)
	}

	v, err := l.c.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	major := v.Major
	o, err := l.c.Overview(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.Itoa(major) + "."; !strings.HasPrefix(o.RabbitMQVersion, want) {
		t.Errorf("Version().Major = %d, broker version %s", major, o.RabbitMQVersion)
	}
}
