package rabbitmq_test

import (
	"strings"
	"testing"

	"github.com/rmqtopo/rmqtopo/ops"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/rabbitmq"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

// with44 adds a test-only RabbitMQ 4.4 to the table for the test's
// duration: a copy of 4.3.1's profile with one behaviour changed, a
// default delivery limit of 50 (no such release exists), and tested as
// 4.4.2 from a Debian suite.
func with44(t *testing.T) {
	t.Helper()
	saved := rabbitmq.Table
	t.Cleanup(func() { rabbitmq.Table = saved })
	traits := rabbitmq.ProfileFor(rabbitmq.Version{Major: 4, Minor: 3, Patch: 6}).Traits()
	traits.DefaultDeliveryLimit = 50
	rabbitmq.Table = append(append([]rabbitmq.Entry(nil), saved...), rabbitmq.Entry{
		From:   rabbitmq.Version{Major: 4, Minor: 4},
		Traits: traits,
		Tested: &rabbitmq.Tested{Version: rabbitmq.Version{Major: 4, Minor: 4, Patch: 2}, Debian: "forky"},
		Cite:   "a test-only release",
	})
}

// TestA44IsOneEntry (issue 45, point 2): a release with one new behaviour
// is one entry of rabbitmq.Table; expansion, the broker's default
// arguments, the plan's checks, the dlq commands and the list of tested
// releases follow it, and the releases before it are judged as before.
func TestA44IsOneEntry(t *testing.T) {
	v436, v440 := rabbitmq.Version{Major: 4, Minor: 3, Patch: 6}, rabbitmq.Version{Major: 4, Minor: 4, Patch: 0}
	if !rabbitmq.ProfileFor(v440).Beyond() {
		t.Fatal("before the entry, 4.4.0 should be beyond every profile")
	}
	with44(t)

	p := rabbitmq.ProfileFor(v440)
	if p.Beyond() || p.Release() != v440 || p.DefaultDeliveryLimit() != 50 || !p.NativeDelayedRetry() {
		t.Errorf("ProfileFor(4.4.0) = %s %+v, want the 4.4 entry", p, p.Traits())
	}
	if last := rabbitmq.TestedReleases(); last[len(last)-1].Series() != "4.4" {
		t.Errorf("tested releases %v, want 4.4 last", last)
	}

	// The broker's default arguments, which the plan reads to see that a
	// queue with or without them is the same.
	if got := topology.DefaultArguments(v440, "quorum")["x-delivery-limit"]; got != int64(50) {
		t.Errorf("DefaultArguments(4.4.0) x-delivery-limit = %v, want 50", got)
	}

	// Expansion: rmqtopo's default (20) is no longer the broker's, so 4.4
	// declares it, as 3.x does; 4.3.6 still does not.
	f, err := spec.Parse("s.yaml", []byte("version: 1\nqueues:\n  - {name: work, type: quorum, retry: {delays: [1s]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for v, want := range map[rabbitmq.Version]any{v436: nil, v440: int64(spec.DefaultDeliveryLimit)} {
		for _, q := range spec.ExpandFor(v, f).Queues {
			if q.Name == "work" && q.Arguments["x-delivery-limit"] != want {
				t.Errorf("RabbitMQ %s: work has x-delivery-limit %v, want %v", v, q.Arguments["x-delivery-limit"], want)
			}
		}
	}
	if spec.DeclaresAlike(v436, v440) {
		t.Error("DeclaresAlike(4.3.6, 4.4.0): the expansions differ")
	}

	// The plan's RT101 names the release's default.
	rt101 := rt101Message(t, v440)
	if !strings.Contains(rt101, "applies its default of 50") {
		t.Errorf("RT101 on 4.4.0: %q, want the default of 50", rt101)
	}
	if rt101 = rt101Message(t, v436); !strings.Contains(rt101, "applies its default of 20") {
		t.Errorf("RT101 on 4.3.6: %q, want the default of 20", rt101)
	}

	// The dlq commands judge a queue given no limit by the release's.
	q := ops.Queue{Name: "raw", Type: "quorum"}
	if err := ops.CheckLeaveSafe(q, v440); err == nil || !strings.Contains(err.Error(), "delivery limit of 50") {
		t.Errorf("CheckLeaveSafe on 4.4.0: %v, want a limit of 50", err)
	}
	if err := ops.CheckLeaveSafe(q, v436); err == nil || !strings.Contains(err.Error(), "delivery limit of 20") {
		t.Errorf("CheckLeaveSafe on 4.3.6: %v, want a limit of 20", err)
	}
}

// rt101Message plans a raw quorum work queue without a delivery limit on
// release v and returns RT101's message.
func rt101Message(t *testing.T, v rabbitmq.Version) string {
	t.Helper()
	f, err := spec.Parse("s.yaml", []byte("version: 1\nvhost: v\nqueues:\n  - {name: raw, raw: true, type: quorum}\n"))
	if err != nil {
		t.Fatal(err)
	}
	live := topology.NewState([]string{"v"})
	p := plan.Diff(live, spec.ExpandFor(v, f), plan.Choices{})
	p.RabbitMQ = &plan.Judged{Version: v.String(), From: plan.FromOverride}
	for _, d := range plan.Check(p, plan.CheckOptions{State: live}) {
		if d.Code == plan.CodeDefaultDeliveryLimit {
			return d.Message
		}
	}
	t.Fatalf("RabbitMQ %s: no %s", v, plan.CodeDefaultDeliveryLimit)
	return ""
}
