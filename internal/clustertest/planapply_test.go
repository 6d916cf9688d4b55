package clustertest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
)

// clusterSpec has quorum queues replicated on 2 of the 3 nodes (so the
// test sees the group size honoured, not the broker's default of every
// node) and classic ones, in the per-attempt layout without return queues
// (whose wait queues it names).
const clusterSpec = `quorum_initial_group_size: 2
layout: per-attempt
exchanges:
  - {name: biz, type: topic}
queues:
  - name: orders
    type: quorum
    bindings: [{exchange: biz, routing_key: "orders.#"}]
    return_queue: false
    retry: {delays: [1s, 5s]}
  - name: audit
    type: classic
    return_queue: false
    bindings: [{exchange: biz, routing_key: "audit.#"}]
    retry: {delays: [2s]}
`

// TestPlanApplyThroughAnyNode applies through one node and plans through
// each of the others: all see the same state, so no changes. The quorum
// queues have the members the spec asked for.
func TestPlanApplyThroughAnyNode(t *testing.T) {
	needsNodes(t)
	c := brokertest.GetCluster(t)
	a := c.Brokers[0]
	vhost := a.NewVhost(t)
	path := writeSpec(t, t.TempDir(), "s.yaml", vhost, clusterSpec)

	must(t, 0, append([]string{"apply", "--auto-approve", path}, conn(a)...)...)
	for _, b := range c.Brokers {
		r := must(t, 0, append([]string{"plan", "--detailed-exitcode", path}, conn(b)...)...)
		if !strings.Contains(r.stdout, "No changes") {
			t.Errorf("plan through %s:\n%s", b.MgmtURL, r.stdout)
		}
	}
	for _, name := range []string{"orders", "orders.dlq", "orders.wait.1.1s"} {
		q := queue(t, c.Brokers[len(c.Brokers)-1], vhost, name)
		if q.Type != "quorum" || len(q.Members) != 2 || q.Arguments["x-quorum-initial-group-size"] != float64(2) {
			t.Errorf("queue %q: type %s, members %v, arguments %v; want quorum on 2 nodes", name, q.Type, q.Members, q.Arguments)
		}
	}
}

// TestApplyWithNodeDown kills one node (its data stays), applies a changed
// spec through another, then restarts the node and applies again: the
// first apply either succeeds or names what it could not do, and the
// re-run converges to a plan with no changes from every node.
func TestApplyWithNodeDown(t *testing.T) {
	killsNodes(t)
	c := brokertest.GetCluster(t)
	if c.External() {
		t.Skip("kills a node: needs the private cluster, not one given by RMQTOPO_TEST_CLUSTER_URLS")
	}
	a, down := c.Brokers[0], c.Brokers[2]
	vhost := a.NewVhost(t)
	dir := t.TempDir()
	// Declared through the node about to die: the classic queues live
	// there, the quorum ones have a replica there.
	must(t, 0, append([]string{"apply", "--auto-approve", writeSpec(t, dir, "v1.yaml", vhost, clusterSpec)}, conn(down)...)...)

	down.Node.Kill()
	t.Cleanup(func() { restart(t, down) })

	v2 := writeSpec(t, dir, "v2.yaml", vhost, clusterSpec+`  - name: billing
    type: quorum
    bindings: [{exchange: biz, routing_key: "billing.#"}]
    retry: {delays: [1s]}
  - name: audit2
    type: classic
    bindings: [{exchange: biz, routing_key: "audit.#"}]
`)
	r := run(t, append([]string{"apply", "--auto-approve", v2}, conn(a)...)...)
	t.Logf("apply with %s down: %s", down.Node.Name, r)
	// The classic queues of v1 live on the dead node: the broker hides
	// their bindings, so the plan re-creates them, and the broker refuses
	// naming the node. Whatever fails must say so, and who is down.
	if r.code != 0 && !(strings.Contains(r.stderr, "planning and applying again finishes the job once it is back") &&
		strings.Contains(r.stderr, down.Node.Name) && strings.Contains(r.stderr, "is down or inaccessible")) {
		t.Errorf("apply failed without naming the node that is down:\n%s", r)
	}
	// Through the dead node: a clear error, nothing else.
	r = run(t, append([]string{"plan", v2}, conn(down)...)...)
	if r.code == 0 || !strings.Contains(r.stderr, "connection refused") {
		t.Errorf("plan through the dead node: want a connection refused error, got %s", r)
	}

	restart(t, down)
	waitOnline(t, a, vhost, "orders")
	must(t, 0, append([]string{"apply", "--auto-approve", v2}, conn(a)...)...)
	for _, b := range c.Brokers {
		must(t, 0, append([]string{"plan", "--detailed-exitcode", v2}, conn(b)...)...)
	}
	q := queue(t, a, vhost, "billing")
	if len(q.Members) != 2 {
		t.Errorf("billing: members %v, want 2", q.Members)
	}
}

// restart starts a killed node of the cluster again, once, and waits
// until the node can declare a quorum queue with a member on every node
// (quorumReady).
func restart(t testing.TB, b *brokertest.Broker) {
	t.Helper()
	if b.Node.Running() {
		return
	}
	// A hang guard of 3 minutes (unscaled) as before: the node boots in
	// about 6 s on a quiet machine (7-18 s at load 28), then declares a
	// quorum queue in under a second.
	ctx, cancel := context.WithTimeout(context.Background(), waitguard.AtLeast(10*time.Second, 3*time.Minute))
	defer cancel()
	if err := b.Node.Restart(ctx); err != nil {
		t.Fatalf("restarting %s: %v", b.Node.Name, err)
	}
	quorumReady(t, ctx, b)
}

// quorumReady waits until b can declare a quorum queue with a member on
// every node of the cluster (Broker.WaitQuorumReady).
func quorumReady(t testing.TB, ctx context.Context, b *brokertest.Broker) {
	t.Helper()
	tries, err := b.WaitQuorumReady(ctx, 3)
	if err != nil {
		t.Fatalf("%s restarted, but %v", b.Node.Name, err)
	}
	if tries > 0 {
		t.Logf("%s declared a quorum queue after %d failed tries", b.Node.Name, tries)
	}
}
