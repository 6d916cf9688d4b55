package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/topology"
)

// The conservation matrix's last place (issue 46): dead-letters a wait
// queue holds. A quorum wait queue dead-letters at-least-once: when the
// work queue refuses an expired retry (full, with reject-publish), the
// wait queue keeps it, counted in its messages (messages_dlx on 4.x), and
// offers it again every dead_letter_worker_publisher_confirm_timeout. A
// change that deletes such a wait queue would lose them.
//
// The broker offers a held dead-letter again only after that timeout, 3
// minutes by default; these cases run on a node of their own whose
// timeout is brokertest.DeadLetterConfirmTimeout, so that the checker
// finds every id within its usual time once the work queue takes them.

// custodyHeld puts ids as held dead-letters: two filler messages fill the
// work queue up to an operator policy's max-length of 1 (a quorum queue
// with reject-publish takes max-length + 1, docs/spec.md, then rejects
// every publish), then ids go into the wait path and, once
// expired, are held by their wait queue. release lifts the policy after
// the apply.
var custodyHeld = custodyPlace{"held-dead-letter", heldFits, func(t *testing.T, r *custodyRun, ids []string) {
	r.extra = []string{"held-dead-letter-filler-1", "held-dead-letter-filler-2"}
	r.publish(t, "", "cw", r.extra)
	policy := "/api/operator-policies/" + url.PathEscape(r.o.vhost) + "/custody-full"
	r.o.api(t, http.MethodPut, policy, `{"pattern":"^cw$","apply-to":"queues","priority":1,"definition":{"max-length":1}}`)
	r.release = func(t *testing.T) { r.o.api(t, http.MethodDelete, policy, "") }
	r.stillHeld = stillHeld
	for _, id := range ids {
		publishRetryOf(t, r.conn, "cw", r.layout.from, custodyDelay, amqp.Publishing{MessageId: id, Body: []byte(id)})
	}
	waitHeld(t, r.o, len(ids))
}}

// stillHeld reports, on RabbitMQ 3.x, whether the vhost's queues still
// hold n dead-letters (messages_dlx). RabbitMQ 3.10.8 did not offer them
// again within 75 s of the work queue taking publishes once more, its
// confirm timeout at 2 s (a live probe, 2026-11-28): the checker cannot
// take them by id there, and counts them held instead, as the broker
// reports them. 4.x offers them again within the timeout: by id only.
func stillHeld(t *testing.T, o *online, n int) bool {
	t.Helper()
	if v, err := topology.ParseVersion(o.b.Version(t)); err != nil || v.Major > 3 {
		return false
	}
	var qs []struct {
		Name string `json:"name"`
		DLX  int    `json:"messages_dlx"`
	}
	if err := json.Unmarshal(o.api(t, http.MethodGet, "/api/queues/"+url.PathEscape(o.vhost)+"?columns=name,messages_dlx", ""), &qs); err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, q := range qs {
		held += q.DLX
	}
	t.Logf("RabbitMQ %s: %d dead-letters still held, %d ids not taken", o.b.Version(t), held, n)
	return held >= n
}

// heldFits: the layouts whose wait queues dead-letter into the work queue
// itself (a return queue takes them first; native holds no dead-letters).
func heldFits(l custodyLayout) bool { return !l.native && l.name != "return-queue" }

// waitHeld waits until the vhost's queues hold n dead-letters in all
// (messages_dlx, RabbitMQ 4.x), or, where the broker does not report
// them (3.10), until the retries are past due and so held.
func waitHeld(t *testing.T, o *online, n int) {
	t.Helper()
	deadline := time.Now().Add(custodyDelay + waitguard.For(15*time.Second))
	reported := false
	for time.Now().Before(deadline) {
		var qs []map[string]any
		if err := json.Unmarshal(o.api(t, http.MethodGet, "/api/queues/"+url.PathEscape(o.vhost), ""), &qs); err != nil {
			t.Fatal(err)
		}
		held := 0
		for _, q := range qs {
			if v, ok := q["messages_dlx"].(float64); ok {
				reported = true
				held += int(v)
			}
		}
		if held >= n {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("queues: %s", o.api(t, http.MethodGet, "/api/queues/"+url.PathEscape(o.vhost)+"?columns=name,messages,messages_ready,messages_dlx,effective_policy_definition,operator_policy", ""))
	if reported {
		t.Fatalf("the wait queues did not hold %d dead-letters within the guard", n)
	}
}

// TestConservationMatrixHeldDeadLetters runs the matrix's held-dead-letter
// cases on a node of their own (see above): every layout × change in
// both modes with RMQTOPO_TEST_CUSTODY=all, a third of the plain ones
// otherwise.
func TestConservationMatrixHeldDeadLetters(t *testing.T) {
	t.Parallel()
	b := heldNode(t)
	all := os.Getenv("RMQTOPO_TEST_CUSTODY") == "all"
	for i, c := range plainFirst(custodyCases([]custodyPlace{custodyHeld})) {
		// make test runs a third of the plain cases (6 of 18), each change
		// at least once: every third, shifted by one per layout (a layout
		// has one plain case per change). The node of its own is a second
		// broker beside the suite's, on a 2-CPU machine.
		if !all && (c.mode == "migrate" || (i+i/len(custodyChanges))%3 != 0) {
			continue
		}
		t.Run(c.name(), func(t *testing.T) {
			t.Parallel()
			runCustody(t, &online{b: b, vhost: b.NewVhost(t), dir: t.TempDir()}, c)
		})
	}
}

// plainFirst returns cases with the plain ones first, in their order.
func plainFirst(cases []custodyCase) []custodyCase {
	return append(slices.DeleteFunc(slices.Clone(cases), func(c custodyCase) bool { return c.mode != "plain" }),
		slices.DeleteFunc(slices.Clone(cases), func(c custodyCase) bool { return c.mode == "plain" })...)
}

// heldNode starts a node of the release under test whose at-least-once
// dead-letter worker offers a held message again after
// brokertest.DeadLetterConfirmTimeout, killed when the test ends.
func heldNode(t *testing.T) *brokertest.Broker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	node, err := brokertest.StartNode(ctx, brokertest.NodeConfig{
		Name: fmt.Sprintf("rmqtopo-held-%d@localhost", os.Getpid()), BaseDir: t.TempDir(),
		StatsInterval: brokertest.TestStatsInterval,
		AdvancedConfig: fmt.Sprintf("[{rabbit, [{dead_letter_worker_publisher_confirm_timeout, %d}]}].\n",
			brokertest.DeadLetterConfirmTimeout.Milliseconds()),
	})
	if err != nil {
		t.Fatalf("starting a node of the test's own: %v", err)
	}
	t.Cleanup(node.Kill)
	return &brokertest.Broker{MgmtURL: node.MgmtURL(), AMQPURL: node.AMQPURL(), User: "guest", Password: "guest", Node: node}
}
