package status

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

const statusSpec = `version: 1
vhost: shop
exchanges:
  - name: orders
    type: topic
queues:
  - name: orders.created
    bindings: [{exchange: orders, routing_key: order.created}]
    immediate_retries: 1
    retry: {delays: [5s, 5s, 1m]}
  - name: orders.paid
    bindings: [{exchange: orders, routing_key: order.paid}]
    retry: {delays: [5s]}
    parking_lot: true
  - name: payments.capture
    layout: per-attempt
    retry: {delays: [10s]}
    dlq: false
`

// liveState is a broker's state holding live and nothing else: no
// ownership records, no counts.
func liveState(live topology.Topology) *topology.State {
	st := topology.NewState(live.Vhosts)
	st.Topology = live
	return st
}

func parseSpec(t *testing.T, yaml string) []*spec.File {
	t.Helper()
	f, err := spec.Parse("shop.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return []*spec.File{f}
}

func TestBuild(t *testing.T) {
	files := parseSpec(t, statusSpec)
	stats := map[string][]broker.QueueInfo{"shop": {
		{Name: "orders.created", Messages: 4, Ready: 3, Unacked: 1, Consumers: 2, PublishRate: 1.5, DeliverRate: 1.25},
		{Name: "rmqtopo.wait.5s", Messages: 7, Ready: 7},
		{Name: "rmqtopo.wait.1m", Messages: 1, Ready: 1},
		{Name: "orders.created.dlq", Messages: 2, Ready: 2},
		{Name: "orders.paid"},
		{Name: "orders.paid.dlq"},
		{Name: "payments.capture", Consumers: 1},
		{Name: "payments.capture.wait.1.10s"},
		{Name: "unrelated", Messages: 99},
	}}
	// The live topology is the desired one with one queue argument changed,
	// one queue and one binding missing.
	live := spec.Expand(files...)
	var queues []topology.Queue
	for _, q := range live.Queues {
		switch q.Name {
		case "rmqtopo.wait.1m":
			args := topology.Args{}
			for k, v := range q.Arguments {
				args[k] = v
			}
			args["x-message-ttl"] = int64(1000)
			q.Arguments = args
		case "orders.paid.parking-lot":
			continue
		}
		queues = append(queues, q)
	}
	live.Queues = queues
	for i, b := range live.Bindings {
		if b.Destination == "orders.paid" && b.Source == "orders" {
			live.Bindings = append(live.Bindings[:i], live.Bindings[i+1:]...)
			break
		}
	}
	st := Build(files, stats, liveState(live))

	type row struct {
		Name, Role string
		Retries    []int
		Shared     bool
		Messages   int64
		Flags      []string
		Drifted    bool
	}
	var got [][]row
	for _, wq := range st.Queues {
		var rows []row
		for _, q := range wq.Queues {
			rows = append(rows, row{q.Name, q.Role, q.Retries, q.Shared, q.Messages, q.Flags, len(q.Drift) > 0})
		}
		got = append(got, rows)
	}
	want := [][]row{
		{
			{Name: "orders.created", Role: RoleWork, Messages: 4},
			{Name: "rmqtopo.wait.5s", Role: RoleWait, Retries: []int{2, 3}, Shared: true, Messages: 7},
			{Name: "rmqtopo.wait.1m", Role: RoleWait, Retries: []int{4}, Messages: 1, Flags: []string{FlagDrift}, Drifted: true},
			{Name: "orders.created.dlq", Role: RoleDLQ, Messages: 2, Flags: []string{FlagDLQNotEmpty}},
		},
		{
			{Name: "orders.paid", Role: RoleWork, Flags: []string{FlagNoConsumers}},
			{Name: "rmqtopo.wait.5s", Role: RoleWait, Retries: []int{1}, Shared: true, Messages: 7},
			{Name: "orders.paid.dlq", Role: RoleDLQ},
			{Name: "orders.paid.parking-lot", Role: RoleParkingLot, Flags: []string{FlagMissing, FlagDrift}, Drifted: true},
		},
		{
			{Name: "payments.capture", Role: RoleWork},
			{Name: "payments.capture.wait.1.10s", Role: RoleWait, Retries: []int{1}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	wantSum := Summary{DLQsNotEmpty: 1, DLQMessages: 2, WithoutConsumers: 1, MissingQueues: 1, DriftedObjects: 4, MessagesInRetries: 8}
	if diff := cmp.Diff(wantSum, st.Summary); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	// Drift of anything but a queue is listed on its own: the missing
	// binding (the replaced wait queue's binding is re-created too).
	if len(st.Drift) != 2 || !strings.Contains(st.Drift[0].Address+st.Drift[1].Address, `"orders -> orders.paid"`) {
		t.Errorf("drift = %+v, want the binding orders -> orders.paid among 2", st.Drift)
	}
	if !st.DLQHasMessages() {
		t.Error("DLQHasMessages = false, want true")
	}

	var text bytes.Buffer
	if err := Text(&text, st, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"queue orders.created (vhost shop, shop.yaml)",
		"rmqtopo.wait.5s  wait 5s (retries 2,3), shared",
		"orders.created.dlq  dlq",
		"dlq-not-empty",
		"orders.paid.parking-lot  parking-lot  -",
		"drift: queue rmqtopo.wait.1m: replace: queue argument x-message-ttl is immutable (1000 → 60000)",
		"drift: queue orders.paid.parking-lot: create",
		"2 other objects differ from the spec:",
		"3 work queues, 1 DLQ holding 2 messages, 1 without consumers, 1 queue missing, 4 drifted objects (see rmqtopo plan)",
	} {
		if !strings.Contains(squeeze(text.String()), want) {
			t.Errorf("text output lacks %q:\n%s", want, text.String())
		}
	}
}

// squeeze collapses the padding tabwriter adds to two spaces.
func squeeze(s string) string {
	var b strings.Builder
	spaces := 0
	for _, r := range s {
		if r == ' ' {
			spaces++
			continue
		}
		if spaces > 0 {
			b.WriteString(strings.Repeat(" ", min(spaces, 2)))
			spaces = 0
		}
		b.WriteRune(r)
	}
	return b.String()
}

func TestBuildWithoutLive(t *testing.T) {
	st := Build(parseSpec(t, statusSpec), nil, nil)
	if st.DriftChecked || st.Summary.DriftedObjects != 0 {
		t.Errorf("without a live topology: DriftChecked=%v drifted=%d, want false and 0", st.DriftChecked, st.Summary.DriftedObjects)
	}
	if st.Summary.MissingQueues != 9 {
		t.Errorf("without stats every queue is missing: got %d, want 9 (the shared wait queue once)", st.Summary.MissingQueues)
	}
}

// TestBuildHeldDeadLetters: a wait queue whose messages are neither
// ready nor delivered holds dead-letters its work queue has not confirmed
// (after a node loss, for minutes); status flags and counts them.
func TestBuildHeldDeadLetters(t *testing.T) {
	f, err := spec.Parse("held.yaml", []byte("version: 1\nvhost: v\nqueues:\n  - name: work\n    type: quorum\n    retry: {delays: [1s]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	stats := map[string][]broker.QueueInfo{"v": {
		{Name: "work", Type: "quorum", Consumers: 1},
		{Name: "work.dlq", Type: "quorum"},
		{Name: "rmqtopo.wait.1s", Type: "quorum", Messages: 1200, Ready: 10, Unacked: 2},
	}}
	st := Build([]*spec.File{f}, stats, nil)
	var wait *QueueStatus
	for i, q := range st.Queues[0].Queues {
		if q.Role == RoleWait {
			wait = &st.Queues[0].Queues[i]
		}
	}
	if wait == nil || wait.Held != 1188 || !slices.Contains(wait.Flags, FlagHeld) {
		t.Fatalf("wait queue row = %+v, want 1188 held and flagged %s", wait, FlagHeld)
	}
	if st.Summary.DeadLettersHeld != 1188 {
		t.Errorf("summary counts %d held, want 1188", st.Summary.DeadLettersHeld)
	}
	var text strings.Builder
	if err := Text(&text, st, false); err != nil || !strings.Contains(text.String(), "1188 dead-letters held in wait queues") {
		t.Errorf("text lacks the held count (%v):\n%s", err, text.String())
	}
}

// Status drift is plan drift: Build diffs with the inputs plan does (the
// specs' records, the operator policies, the wait-queue names), so it
// counts exactly the changes plan.Diff makes of the same state.
func TestBuildDriftIsPlanDrift(t *testing.T) {
	files := parseSpec(t, statusSpec)
	live := spec.Expand(files...)
	live.Queues = live.Queues[1:] // one missing
	st := liveState(live)
	st.OperatorPolicies = []topology.Policy{{Vhost: "shop", Name: "cap", Pattern: ".*", ApplyTo: "queues",
		Definition: topology.Args{"max-length": int64(10)}}}
	rec := topology.NewRecord(files[0].Spec.Name, "shop")
	rec.Owned[topology.Address{Kind: topology.KindQueue, Vhost: "shop", Name: "rmqtopo.wait.9s"}] = true
	st.Records = []topology.Record{rec}
	st.Topology.Queues = append(st.Topology.Queues, topology.Queue{Vhost: "shop", Name: "rmqtopo.wait.9s", Durable: true})

	p := plan.Diff(st, spec.Expand(files...), plan.Choices{Specs: spec.Names(files)})
	changes := 0
	for _, c := range p.Changes {
		if c.Action != plan.NoOp {
			changes++
		}
	}
	got := Build(files, nil, st)
	if changes == 0 || got.Summary.DriftedObjects != changes {
		t.Errorf("status counts %d drifted objects, plan %d changes", got.Summary.DriftedObjects, changes)
	}
}
