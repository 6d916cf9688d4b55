package clustertest

import (
	"bytes"
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
)

// TestDLQReplayNodeLoss runs `rmqtopo dlq replay` of a 5,000-message quorum
// DLQ through one node and kills, mid-replay, the node that leads both the
// DLQ and its work queue. The replay may stop with failures; re-runs after
// the restart empty the DLQ. Every message must then be in the work queue,
// none lost; duplicates are counted.
func TestDLQReplayNodeLoss(t *testing.T) {
	c := brokertest.GetCluster(t)
	if c.External() {
		t.Skip("kills a node: needs the private cluster, not one given by RMQTOPO_TEST_CLUSTER_URLS")
	}
	const n = 5000
	a, victim := c.Brokers[0], c.Brokers[2]
	vhost := a.NewVhost(t)
	spec := writeSpec(t, t.TempDir(), "replay.yaml", vhost,
		"quorum_initial_group_size: 3\nqueues:\n  - name: orders\n    type: quorum\n    retry: {delays: [1s]}\n")
	must(t, 0, append([]string{"apply", "--auto-approve", spec}, conn(victim)...)...) // victim leads
	dlq := contract.DeadLetterQueue("orders")
	fill(t, a.Dial(t, vhost), dlq, n)

	for _, q := range []string{dlq, "orders"} {
		if l := queue(t, a, vhost, q).Leader; l != victim.Node.Name {
			t.Fatalf("queue %q is led by %s, not by %s through which it was declared", q, l, victim.Node.Name)
		}
	}
	args := append([]string{"dlq", "replay", dlq, "--vhost", vhost, "--window", "100"}, conn(a)...)
	cmd := exec.Command(cli(t), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	killed := false
	for !killed {
		select {
		case err := <-done:
			t.Logf("the replay ended before the kill (%v):\n%s", err, out.String())
			done <- err
			killed = true
			continue
		case <-time.After(50 * time.Millisecond):
		}
		if moved := a.QueueDepth(t, vhost, "orders"); moved >= n/5 {
			victim.Node.Kill()
			t.Logf("killed %s with %d of %d messages moved", victim.Node.Name, moved, n)
			killed = true
		}
	}
	err := <-done
	t.Logf("first replay, %s killed mid-way: %v\n%s", victim.Node.Name, err, out.String())
	t.Logf("leaders after the kill: %s of %s, %s of orders", queue(t, a, vhost, dlq).Leader, dlq, queue(t, a, vhost, "orders").Leader)
	restart(t, victim)
	waitOnline(t, a, vhost, dlq, 2*time.Minute)
	for i := 0; a.QueueDepth(t, vhost, dlq) > 0; i++ {
		if i == 5 {
			t.Fatalf("the DLQ still holds %d messages after 5 re-runs", a.QueueDepth(t, vhost, dlq))
		}
		r := run(t, args...)
		t.Logf("re-run %d: %s", i+1, r)
	}
	countReplay(t, a, vhost, "orders", n)
}

// fill publishes messages "0".."n-1" to queue, confirmed, as dead-letters
// that exhausted their retries.
func fill(t *testing.T, conn *amqp.Connection, queue string, n int) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var pending []*amqp.DeferredConfirmation
	for i := 0; i < n; i++ {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, amqp.Publishing{
			DeliveryMode: amqp.Persistent, Body: []byte(strconv.Itoa(i)),
			Headers: amqp.Table{contract.HeaderAttempt: "2"}})
		if err != nil {
			t.Fatal(err)
		}
		pending = append(pending, dc)
	}
	for i, dc := range pending {
		if ok, err := dc.WaitContext(ctx); !ok || err != nil {
			t.Fatalf("message %d not confirmed: %v", i, err)
		}
	}
}

// countReplay drains queue and checks that it holds every message
// 0..n-1, counting duplicates.
func countReplay(t *testing.T, b *brokertest.Broker, vhost, queue string, n int) {
	t.Helper()
	seen := map[int]int{}
	conn := b.Dial(t, vhost)
	for _, d := range brokertest.Drain(t, conn, queue, b.QueueDepth(t, vhost, queue), time.Minute) {
		id, _ := strconv.Atoi(string(d.Body))
		seen[id]++
	}
	var lost []string
	dups := 0
	for id := 0; id < n; id++ {
		if seen[id] == 0 {
			lost = append(lost, strconv.Itoa(id))
		}
		dups += max(seen[id]-1, 0)
	}
	t.Logf("after the replays: %d of %d messages in %q, %d duplicates, %d lost", len(seen), n, queue, dups, len(lost))
	if len(lost) > 0 {
		t.Errorf("%d messages lost: %s", len(lost), strings.Join(lost[:min(len(lost), 10)], " "))
	}
	if len(seen) > n {
		t.Errorf("%d distinct messages, want %d", len(seen), n)
	}
}
