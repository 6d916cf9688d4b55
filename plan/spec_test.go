package plan_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

func expand(t *testing.T, yaml string) topology.Topology {
	t.Helper()
	f, err := spec.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("spec does not parse: %v\n%s", err, yaml)
	}
	return spec.Expand(f)
}

const scheduleSpec = `
version: 1
vhost: /
layout: %s
exchanges:
  - name: shop
    type: topic
queues:
  - name: orders
    bindings:
      - exchange: shop
        routing_key: order.*
    retry:
      delays: [%s]
  - name: refunds
    bindings:
      - exchange: shop
        routing_key: refund.*
    retry:
      delays: [10s]
`

// A schedule change is the reason wait queues carry their delay in their
// name: the new wait queue is created beside the old one, the retry
// exchange's binding moves to it in the same apply, and the old one drains
// into the work queue instead of being destroyed.
func TestDiffScheduleChange(t *testing.T) {
	tests := []struct {
		name     string
		layout   string
		messages map[string]int64 // by queue name
		want     []string
	}{
		{
			name:     "per-attempt layout, old wait queue still holding retries",
			layout:   "per-attempt",
			messages: map[string]int64{"orders.wait.2.1m": 5},
			want: []string{
				`no-op queue "orders.wait.2.1m" in vhost "/" # retired wait queue draining: 5 messages waiting; deleted by a later apply once empty [messages=5] [draining]`,
				`create queue "orders.wait.2.2m" in vhost "/"`,
				`create binding "orders.retry -> orders.wait.2.2m" [queue key="" args={rmqtopo-attempt: "3", x-match: "all"}] in vhost "/"`,
				`delete binding "orders.retry -> orders.wait.2.1m" [queue key="" args={rmqtopo-attempt: "3", x-match: "all"}] in vhost "/" # not in spec`,
			},
		},
		{
			name:     "per-attempt layout, old wait queue empty",
			layout:   "per-attempt",
			messages: map[string]int64{"orders.wait.2.1m": 0},
			want: []string{
				`create queue "orders.wait.2.2m" in vhost "/"`,
				`create binding "orders.retry -> orders.wait.2.2m" [queue key="" args={rmqtopo-attempt: "3", x-match: "all"}] in vhost "/"`,
				`delete binding "orders.retry -> orders.wait.2.1m" [queue key="" args={rmqtopo-attempt: "3", x-match: "all"}] in vhost "/" # not in spec`,
				`delete queue "orders.wait.2.1m" in vhost "/" # retired wait queue, empty [messages=0]`,
			},
		},
		{
			name:     "shared layout, the wait queue no queue uses any more drains",
			layout:   "shared",
			messages: map[string]int64{"rmqtopo.wait.1m": 12, "rmqtopo.wait.10s": 3},
			want: []string{
				`no-op queue "rmqtopo.wait.1m" in vhost "/" # retired wait queue draining: 12 messages waiting; deleted by a later apply once empty [messages=12] [draining]`,
				`create queue "rmqtopo.wait.2m" in vhost "/"`,
				`create binding "orders.retry -> rmqtopo.wait.2m" [queue key="" args={rmqtopo-attempt: "3", x-match: "all"}] in vhost "/"`,
				`delete binding "orders.retry -> rmqtopo.wait.1m" [queue key="" args={rmqtopo-attempt: "3", x-match: "all"}] in vhost "/" # not in spec`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := expand(t, fmt.Sprintf(scheduleSpec, tt.layout, "10s, 1m"))
			desired := expand(t, fmt.Sprintf(scheduleSpec, tt.layout, "10s, 2m"))
			messages := map[topology.Address]int64{}
			for name, n := range tt.messages {
				messages[topology.Address{Kind: topology.KindQueue, Vhost: "/", Name: name}] = n
			}
			// Without Prune: a schedule change must not need it.
			got := plan.DiffTopology(live, desired, plan.Options{Owned: owned(live), Messages: messages, IsWaitQueue: isWaitQueue})
			if diff := cmp.Diff(tt.want, rows(got, false)); diff != "" {
				t.Errorf("Diff changes (-want +got):\n%s", diff)
			}
		})
	}
}

var inlineSpecs = []string{
	`
version: 1
vhost: /
queues:
  - name: bare
    dlq: false
`,
	`
version: 1
vhost: billing
layout: per-attempt
exchanges:
  - name: invoices
    type: headers
    arguments: {alternate-exchange: invoices.unrouted}
  - name: invoices.unrouted
    type: fanout
    bindings:
      - exchange: amq.topic
        routing_key: "invoice.#"
queues:
  - name: invoices.pdf
    type: quorum
    delivery_limit: 5
    message_ttl: 1h
    bindings:
      - exchange: invoices
        arguments: {x-match: any, format: pdf, kind: invoice}
    immediate_retries: 2
    retry:
      exponential: {initial: 250ms, factor: 3, max: 1m, attempts: 6}
    parking_lot: true
policies:
  - name: lazy
    pattern: "^invoices\\."
    apply_to: queues
    priority: 3
    definition: {max-length: 100000, overflow: reject-publish, federation-upstream-set: all}
`,
}

// randomSpec writes a valid spec from a seed: a few queues with varied
// types, layouts, schedules and presets, sometimes sharing delays.
func randomSpec(seed uint64) string {
	r := rand.New(rand.NewPCG(seed, seed*7919))
	var b strings.Builder
	layouts := []string{"shared", "per-attempt"}
	fmt.Fprintf(&b, "version: 1\nvhost: v%d\nlayout: %s\n", seed, layouts[r.IntN(2)])
	if r.IntN(2) == 0 {
		fmt.Fprintf(&b, "wait_queue_type: %s\n", []string{"classic", "quorum"}[r.IntN(2)])
	}
	b.WriteString("exchanges:\n  - name: events\n    type: topic\n  - name: fan\n    type: fanout\n")
	delays := []string{"1s", "5s", "30s", "1m", "90s", "1500ms", "10m"}
	b.WriteString("queues:\n")
	for i := range 1 + r.IntN(4) {
		fmt.Fprintf(&b, "  - name: q%d\n", i)
		quorum := r.IntN(2) == 0
		if quorum {
			b.WriteString("    type: quorum\n")
			if r.IntN(2) == 0 {
				fmt.Fprintf(&b, "    delivery_limit: %d\n", 1+r.IntN(50))
			}
		}
		fmt.Fprintf(&b, "    bindings:\n      - exchange: %s\n        routing_key: k%d\n", []string{"events", "fan"}[r.IntN(2)], i)
		preset := []string{"", "", "", "goqueue", "outbox", "spring"}[r.IntN(6)]
		if preset != "" {
			fmt.Fprintf(&b, "    preset: %s\n", preset)
		} else {
			if r.IntN(2) == 0 {
				fmt.Fprintf(&b, "    immediate_retries: %d\n", r.IntN(3))
			}
			if r.IntN(3) == 0 {
				fmt.Fprintf(&b, "    layout: %s\n", layouts[r.IntN(2)])
			}
		}
		var ds []string
		for range r.IntN(4) {
			d := delays[r.IntN(len(delays))]
			if preset == "outbox" && d == "1500ms" {
				continue
			}
			ds = append(ds, d)
		}
		fmt.Fprintf(&b, "    retry:\n      delays: [%s]\n", strings.Join(ds, ", "))
		if r.IntN(4) == 0 {
			b.WriteString("    dlq: false\n")
		}
		if r.IntN(3) == 0 {
			b.WriteString("    parking_lot: true\n")
		}
		if r.IntN(3) == 0 {
			fmt.Fprintf(&b, "    max_length: %d\n", 1+r.IntN(1000))
		}
	}
	return b.String()
}

// desiredTopologies returns every spec-derived topology the properties are
// checked on, by a name for failure messages.
func desiredTopologies(t *testing.T) map[string]topology.Topology {
	t.Helper()
	out := map[string]topology.Topology{}
	for i, s := range inlineSpecs {
		out[fmt.Sprintf("inline[%d]", i)] = expand(t, s)
	}
	for seed := range uint64(40) {
		out[fmt.Sprintf("random(%d)", seed)] = expand(t, randomSpec(seed))
	}
	var paths []string
	for _, glob := range []string{"../examples/*.yaml", "../examples/presets/*.yaml"} {
		m, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, m...)
	}
	if len(paths) == 0 {
		t.Fatal("no examples found")
	}
	// One at a time: the examples all describe vhost "/".
	for _, p := range paths {
		files, err := spec.LoadFiles(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out[p] = spec.Expand(files...)
	}
	return out
}

func TestDiffProperties(t *testing.T) {
	for name, desired := range desiredTopologies(t) {
		t.Run(name, func(t *testing.T) {
			all := plan.Options{Prune: true, Owned: owned(desired), IsWaitQueue: isWaitQueue}
			same := plan.DiffTopology(desired, desired, all)
			if same.HasChanges() {
				t.Errorf("DiffTopology(desired, desired) has changes:\n%s", strings.Join(rows(same, false), "\n"))
			}

			fresh := plan.DiffTopology(topology.Topology{}, desired, all)
			var rebuilt topology.Topology
			created := map[topology.Address]bool{}
			for _, c := range fresh.Changes {
				if c.Action != plan.Create {
					t.Errorf("DiffTopology(empty, desired): %s %s, want create", c.Action, c.Address)
					continue
				}
				if c.Address.Kind == topology.KindBinding {
					b := c.After.Binding
					for _, end := range []topology.Address{
						{Kind: topology.KindExchange, Vhost: b.Vhost, Name: b.Source},
						{Kind: kindOf(b.DestinationType), Vhost: b.Vhost, Name: b.Destination},
					} {
						if !created[end] && !strings.HasPrefix(end.Name, "amq.") {
							t.Errorf("%s is planned before %s", c.Address, end)
						}
					}
				}
				created[c.Address] = true
				rebuilt = addObject(t, rebuilt, c)
			}
			rebuilt.Sort()
			if diff := cmp.Diff(desired, rebuilt); diff != "" {
				t.Errorf("creates do not rebuild desired (-desired +rebuilt):\n%s", diff)
			}
		})
	}
}

func kindOf(destinationType string) topology.Kind {
	if destinationType == topology.DestExchange {
		return topology.KindExchange
	}
	return topology.KindQueue
}

func addObject(t *testing.T, to topology.Topology, c plan.Change) topology.Topology {
	t.Helper()
	o := c.After
	switch {
	case c.Address.Kind == topology.KindVhost:
		to.Vhosts = append(to.Vhosts, c.Address.Name)
	case o.Exchange != nil:
		to.Exchanges = append(to.Exchanges, *o.Exchange)
	case o.Queue != nil:
		to.Queues = append(to.Queues, *o.Queue)
	case o.Binding != nil:
		to.Bindings = append(to.Bindings, *o.Binding)
	case o.Policy != nil:
		to.Policies = append(to.Policies, *o.Policy)
	default:
		t.Errorf("%s: create without an object", c.Address)
	}
	return to
}
