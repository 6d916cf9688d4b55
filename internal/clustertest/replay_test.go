package clustertest

import (
	"testing"

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
	killsNodes(t)
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
	// Dead-letters that exhausted their retries.
	fill(t, a.Dial(t, vhost), dlq, n, func(int) amqp.Table { return amqp.Table{contract.HeaderAttempt: "2"} })
	mustLead(t, a, victim, vhost, dlq, "orders")

	args := append([]string{"dlq", "replay", dlq, "--vhost", vhost, "--window", "100"}, conn(a)...)
	out, err := killMidway(t, args, victim, func() int { return a.QueueDepth(t, vhost, "orders") }, n/5)
	t.Logf("first replay, %s killed mid-way: %v\n%s", victim.Node.Name, err, out)
	t.Logf("leaders after the kill: %s of %s, %s of orders", queue(t, a, vhost, dlq).Leader, dlq, queue(t, a, vhost, "orders").Leader)
	restart(t, victim)
	waitOnline(t, a, vhost, dlq)
	rerun(t, args, func(*result) bool { return a.QueueDepth(t, vhost, dlq) == 0 })
	countReplay(t, a, vhost, "orders", n)
}

// countReplay drains queue and checks that it holds every message
// 0..n-1, counting duplicates.
func countReplay(t *testing.T, b *brokertest.Broker, vhost, queue string, n int) {
	t.Helper()
	seen := drainIDs(t, b, vhost, queue, nil)
	var lost []int
	dups := 0
	for id := 0; id < n; id++ {
		if seen[id] == 0 {
			lost = append(lost, id)
		}
		dups += max(seen[id]-1, 0)
	}
	t.Logf("after the replays: %d of %d messages in %q, %d duplicates, %d lost", len(seen), n, queue, dups, len(lost))
	if len(lost) > 0 {
		t.Errorf("%d messages lost: %s", len(lost), firstIDs(lost))
	}
	if len(seen) > n {
		t.Errorf("%d distinct messages, want %d", len(seen), n)
	}
}
