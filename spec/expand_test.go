package spec

import (
	"go/ast"
	"go/parser"
	"go/token"
	"math/rand"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/topology"
)

// quorumArgs are the arguments of a quorum queue with the given delivery
// limit plus extra.
func quorumArgs(limit int64, extra topology.Args) topology.Args {
	a := topology.Args{"x-queue-type": "quorum", "x-delivery-limit": limit}
	for k, v := range extra {
		a[k] = v
	}
	return a
}

// atLeastOnce are the dead-letter arguments of a quorum queue.
var atLeastOnce = topology.Args{"x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish"}

func merge(as ...topology.Args) topology.Args {
	out := topology.Args{}
	for _, a := range as {
		for k, v := range a {
			out[k] = v
		}
	}
	return out
}

// pol is an rmqtopo-managed policy.
func pol(vhost, name, pattern, applyTo string, def topology.Args) topology.Policy {
	return topology.Policy{Vhost: vhost, Name: name, Pattern: pattern, ApplyTo: applyTo, Priority: contract.ManagedPolicyPriority, Definition: def}
}

// qpol is the rmqtopo policy of one queue in vhost "/".
func qpol(queue, pattern string, def topology.Args) topology.Policy {
	return pol("/", "rmqtopo.queue."+queue, pattern, "queues", def)
}

// atLeastOncePolicy are the dead-letter policy keys of a quorum queue.
var atLeastOncePolicy = topology.Args{"dead-letter-strategy": "at-least-once", "overflow": "reject-publish"}

func attempt(n int) topology.Args {
	return topology.Args{"x-match": "all", "rmqtopo-attempt": strconv.Itoa(n)}
}

func sorted(t topology.Topology) topology.Topology {
	t.Sort()
	return t
}

// TestExpand pins the whole topology of small specs, one per layout and
// preset, so every generated name and argument is deliberate.
func TestExpand(t *testing.T) {
	const in = "version: 1\nexchanges:\n  - {name: in, type: topic}\n"
	inEx := topology.Exchange{Vhost: "/", Name: "in", Type: "topic", Durable: true}
	bindIn := func(q string) topology.Binding {
		return topology.Binding{Vhost: "/", Source: "in", Destination: q, DestinationType: "queue", RoutingKey: "k"}
	}
	tests := []struct {
		name string
		spec string
		want topology.Topology
	}{
		{
			name: "shared layout: one quorum wait queue per delay, DLX without routing key",
			spec: in + "queues:\n  - name: work\n    bindings: [{exchange: in, routing_key: k}]\n    retry: {delays: [1s, 5s]}\n",
			want: topology.Topology{
				Vhosts: []string{"/"},
				Exchanges: []topology.Exchange{
					inEx,
					{Vhost: "/", Name: "work.dlx", Type: "fanout", Durable: true},
					{Vhost: "/", Name: "work.retry", Type: "headers", Durable: true},
				},
				Queues: []topology.Queue{
					{Vhost: "/", Name: "rmqtopo.wait.1s", Durable: true, Arguments: quorumArgs(20, merge(atLeastOnce, topology.Args{"x-message-ttl": int64(1000), "x-dead-letter-exchange": ""}))},
					{Vhost: "/", Name: "rmqtopo.wait.5s", Durable: true, Arguments: quorumArgs(20, merge(atLeastOnce, topology.Args{"x-message-ttl": int64(5000), "x-dead-letter-exchange": ""}))},
					// Its dead-lettering is an argument: named after the
					// queue, it never changes in place; with nothing else
					// set, the queue has no policy.
					{Vhost: "/", Name: "work", Durable: true, Arguments: topology.Args{"x-dead-letter-exchange": "work.dlx"}},
					{Vhost: "/", Name: "work.dlq", Durable: true},
				},
				Bindings: []topology.Binding{
					bindIn("work"),
					{Vhost: "/", Source: "work.dlx", Destination: "work.dlq", DestinationType: "queue"},
					{Vhost: "/", Source: "work.retry", Destination: "rmqtopo.wait.1s", DestinationType: "queue", Arguments: attempt(2)},
					{Vhost: "/", Source: "work.retry", Destination: "rmqtopo.wait.5s", DestinationType: "queue", Arguments: attempt(3)},
				},
			},
		},
		{
			name: "per-attempt layout on a quorum queue: one wait queue per retry, routing key back to the queue",
			spec: in + "queues:\n  - name: work\n    type: quorum\n    layout: per-attempt\n    delivery_limit: 7\n    bindings: [{exchange: in, routing_key: k}]\n    retry: {fixed: {delay: 5s, attempts: 2}}\n",
			want: topology.Topology{
				Vhosts: []string{"/"},
				Exchanges: []topology.Exchange{
					inEx,
					{Vhost: "/", Name: "work.dlx", Type: "fanout", Durable: true},
					{Vhost: "/", Name: "work.retry", Type: "headers", Durable: true},
				},
				Queues: []topology.Queue{
					{Vhost: "/", Name: "work", Durable: true, Arguments: merge(atLeastOnce, topology.Args{"x-queue-type": "quorum", "x-dead-letter-exchange": "work.dlx"})},
					{Vhost: "/", Name: "work.dlq", Durable: true, Arguments: quorumArgs(DeadEndDeliveryLimit, nil)},
					{Vhost: "/", Name: "work.wait.1.5s", Durable: true, Arguments: quorumArgs(20, merge(atLeastOnce, topology.Args{"x-message-ttl": int64(5000), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "work"}))},
					{Vhost: "/", Name: "work.wait.2.5s", Durable: true, Arguments: quorumArgs(20, merge(atLeastOnce, topology.Args{"x-message-ttl": int64(5000), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "work"}))},
				},
				Bindings: []topology.Binding{
					bindIn("work"),
					{Vhost: "/", Source: "work.dlx", Destination: "work.dlq", DestinationType: "queue"},
					{Vhost: "/", Source: "work.retry", Destination: "work.wait.1.5s", DestinationType: "queue", Arguments: attempt(2)},
					{Vhost: "/", Source: "work.retry", Destination: "work.wait.2.5s", DestinationType: "queue", Arguments: attempt(3)},
				},
				// The spec's delivery limit may change: it is in the policy.
				Policies: []topology.Policy{qpol("work", "^work$", topology.Args{"delivery-limit": int64(7)})},
			},
		},
		{
			name: "per-attempt layout on a classic queue: classic wait queues, no quorum-only arguments",
			spec: "version: 1\nqueues:\n  - name: w\n    layout: per-attempt\n    immediate_retries: 1\n    dlq: false\n    parking_lot: true\n    message_ttl: 1m\n    max_length: 10\n    retry: {delays: [1500ms]}\n",
			want: topology.Topology{
				Vhosts: []string{"/"},
				Exchanges: []topology.Exchange{
					{Vhost: "/", Name: "w.retry", Type: "headers", Durable: true},
				},
				Queues: []topology.Queue{
					{Vhost: "/", Name: "w", Durable: true},
					{Vhost: "/", Name: "w.parking-lot", Durable: true},
					{Vhost: "/", Name: "w.wait.2.1500ms", Durable: true, Arguments: topology.Args{"x-message-ttl": int64(1500), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "w"}},
				},
				Bindings: []topology.Binding{
					{Vhost: "/", Source: "w.retry", Destination: "w", DestinationType: "queue", Arguments: attempt(2)},
					{Vhost: "/", Source: "w.retry", Destination: "w.wait.2.1500ms", DestinationType: "queue", Arguments: attempt(3)},
				},
				Policies: []topology.Policy{qpol("w", "^w$", topology.Args{"message-ttl": int64(60000), "max-length": int64(10)})},
			},
		},
		{
			name: "zero retries: no wait queues, failure straight to the DLQ",
			spec: "version: 1\nvhost: v\nwait_queue_type: classic\nqueues:\n  - name: audit\n    retry: {delays: []}\n",
			want: topology.Topology{
				Vhosts: []string{"v"},
				Exchanges: []topology.Exchange{
					{Vhost: "v", Name: "audit.dlx", Type: "fanout", Durable: true},
					{Vhost: "v", Name: "audit.retry", Type: "headers", Durable: true},
				},
				Queues: []topology.Queue{
					{Vhost: "v", Name: "audit", Durable: true, Arguments: topology.Args{"x-dead-letter-exchange": "audit.dlx"}},
					{Vhost: "v", Name: "audit.dlq", Durable: true},
				},
				Bindings: []topology.Binding{
					{Vhost: "v", Source: "audit.dlx", Destination: "audit.dlq", DestinationType: "queue"},
				},
			},
		},
		{
			name: "goqueue preset: the library's declares as arguments, rmqtopo's additions as policies",
			spec: in + "queues:\n  - name: ev\n    preset: goqueue\n    bindings: [{exchange: in, routing_key: k}]\n    retry: {delays: [1s, 2s]}\n",
			want: topology.Topology{
				Vhosts: []string{"/"},
				Exchanges: []topology.Exchange{
					{Vhost: "/", Name: "ev.exhausted", Type: "fanout", Durable: true},
					{Vhost: "/", Name: "ev__retry_dlx", Type: "fanout", Durable: true},
					{Vhost: "/", Name: "ev__retry_exchange", Type: "topic", Durable: true},
					inEx,
				},
				Queues: []topology.Queue{
					{Vhost: "/", Name: "ev", Durable: true},
					{Vhost: "/", Name: "ev.dlq", Durable: true},
					{Vhost: "/", Name: "ev.exhausted", Durable: true, Arguments: topology.Args{"x-message-ttl": int64(0), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "ev.dlq"}},
					{Vhost: "/", Name: "ev__retry.1", Durable: true, Arguments: topology.Args{"x-dead-letter-exchange": "ev__retry_dlx"}},
					{Vhost: "/", Name: "ev__retry.2", Durable: true, Arguments: topology.Args{"x-dead-letter-exchange": "ev__retry_dlx"}},
				},
				Bindings: []topology.Binding{
					{Vhost: "/", Source: "ev.exhausted", Destination: "ev.exhausted", DestinationType: "queue"},
					{Vhost: "/", Source: "ev__retry_dlx", Destination: "ev", DestinationType: "queue"},
					{Vhost: "/", Source: "ev__retry_exchange", Destination: "ev__retry.1", DestinationType: "queue", RoutingKey: "ev__retry.1"},
					{Vhost: "/", Source: "ev__retry_exchange", Destination: "ev__retry.2", DestinationType: "queue", RoutingKey: "ev__retry.2"},
					bindIn("ev"),
				},
				Policies: []topology.Policy{
					pol("/", "rmqtopo.exchange.ev__retry_exchange", "^ev__retry_exchange$", "exchanges", topology.Args{"alternate-exchange": "ev.exhausted"}),
					qpol("ev", "^ev$", topology.Args{"dead-letter-exchange": "", "dead-letter-routing-key": "ev.dlq"}),
					qpol("ev__retry.1", `^ev__retry\.1$`, topology.Args{"message-ttl": int64(1000)}),
					qpol("ev__retry.2", `^ev__retry\.2$`, topology.Args{"message-ttl": int64(2000)}),
				},
			},
		},
		{
			name: "outbox preset",
			spec: in + "queues:\n  - name: demo\n    type: quorum\n    preset: outbox\n    bindings: [{exchange: in, routing_key: k}]\n    retry: {delays: [2s, 5s, 2s]}\n",
			want: topology.Topology{
				Vhosts:    []string{"/"},
				Exchanges: []topology.Exchange{inEx},
				Queues: []topology.Queue{
					{Vhost: "/", Name: "demo", Durable: true, Arguments: topology.Args{"x-queue-type": "quorum"}},
					{Vhost: "/", Name: "demo.delay_2s", Durable: true, Arguments: topology.Args{"x-queue-type": "quorum", "x-message-ttl": int64(2000), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "demo"}},
					{Vhost: "/", Name: "demo.delay_5s", Durable: true, Arguments: topology.Args{"x-queue-type": "quorum", "x-message-ttl": int64(5000), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "demo"}},
					{Vhost: "/", Name: "demo.dlq", Durable: true, Arguments: quorumArgs(DeadEndDeliveryLimit, nil)},
				},
				Bindings: []topology.Binding{bindIn("demo")},
				Policies: []topology.Policy{
					pol("/", "rmqtopo.outbox.demo", `^demo\.delay_[0-9]+s$`, "queues", atLeastOncePolicy),
					qpol("demo", "^demo$", merge(atLeastOncePolicy, topology.Args{"dead-letter-exchange": "", "dead-letter-routing-key": "demo.dlq", "delivery-limit": int64(20)})),
				},
			},
		},
		{
			name: "spring preset: shared wait and return headers exchanges, delays in milliseconds",
			spec: "version: 1\nqueues:\n  - name: a\n    preset: spring\n    retry: {delays: [10s]}\n  - name: b\n    type: quorum\n    preset: spring\n    retry: {delays: [10s, 20s]}\n",
			want: topology.Topology{
				Vhosts: []string{"/"},
				Exchanges: []topology.Exchange{
					{Vhost: "/", Name: "a.dlx", Type: "fanout", Durable: true},
					{Vhost: "/", Name: "b.dlx", Type: "fanout", Durable: true},
					{Vhost: "/", Name: "return", Type: "headers", Durable: true},
					{Vhost: "/", Name: "wait", Type: "headers", Durable: true},
				},
				Queues: []topology.Queue{
					{Vhost: "/", Name: "a", Durable: true, Arguments: topology.Args{"x-dead-letter-exchange": "a.dlx"}},
					{Vhost: "/", Name: "a.dlq", Durable: true},
					{Vhost: "/", Name: "b", Durable: true, Arguments: topology.Args{"x-queue-type": "quorum", "x-dead-letter-exchange": "b.dlx"}},
					{Vhost: "/", Name: "b.dlq", Durable: true, Arguments: quorumArgs(DeadEndDeliveryLimit, nil)},
					{Vhost: "/", Name: "wait-queue-10000", Durable: true, Arguments: topology.Args{"x-message-ttl": int64(10000), "x-dead-letter-exchange": "return"}},
					{Vhost: "/", Name: "wait-queue-20000", Durable: true, Arguments: topology.Args{"x-message-ttl": int64(20000), "x-dead-letter-exchange": "return"}},
				},
				Bindings: []topology.Binding{
					{Vhost: "/", Source: "a.dlx", Destination: "a.dlq", DestinationType: "queue"},
					{Vhost: "/", Source: "b.dlx", Destination: "b.dlq", DestinationType: "queue"},
					{Vhost: "/", Source: "return", Destination: "a", DestinationType: "queue", Arguments: topology.Args{"return-to": "a"}},
					{Vhost: "/", Source: "return", Destination: "b", DestinationType: "queue", Arguments: topology.Args{"return-to": "b"}},
					{Vhost: "/", Source: "wait", Destination: "wait-queue-10000", DestinationType: "queue", Arguments: topology.Args{"wait-for": "10000"}},
					{Vhost: "/", Source: "wait", Destination: "wait-queue-20000", DestinationType: "queue", Arguments: topology.Args{"wait-for": "20000"}},
				},
				Policies: []topology.Policy{qpol("b", "^b$", merge(atLeastOncePolicy, topology.Args{"delivery-limit": int64(20)}))},
			},
		},
		{
			name: "policies and exchange-to-exchange bindings",
			spec: in + "  - name: audit\n    type: fanout\n    durable: false\n    internal: true\n    arguments: {alternate-exchange: in}\n    bindings: [{exchange: in, routing_key: '#'}]\npolicies:\n  - {name: cap, pattern: '^a', definition: {max-length: 5}, priority: 2}\n",
			want: topology.Topology{
				Vhosts: []string{"/"},
				Exchanges: []topology.Exchange{
					{Vhost: "/", Name: "audit", Type: "fanout", Internal: true, Arguments: topology.Args{"alternate-exchange": "in"}},
					inEx,
				},
				Bindings: []topology.Binding{{Vhost: "/", Source: "in", Destination: "audit", DestinationType: "exchange", RoutingKey: "#"}},
				Policies: []topology.Policy{{Vhost: "/", Name: "cap", Pattern: "^a", ApplyTo: "queues", Priority: 2, Definition: topology.Args{"max-length": int64(5)}}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := mustParse(t, "spec.yaml", tt.spec)
			got := Expand(f)
			if diff := cmp.Diff(sorted(tt.want), got); diff != "" {
				t.Errorf("Expand (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSharedWaitQueuesArePerVhost(t *testing.T) {
	a := mustParse(t, "a.yaml", "version: 1\nvhost: a\nqueues:\n  - {name: x, retry: {delays: [10s]}}\n  - {name: y, retry: {fixed: {delay: 10s, attempts: 3}}}\n")
	b := mustParse(t, "b.yaml", "version: 1\nvhost: b\nqueues:\n  - {name: x, retry: {delays: [10s]}}\n")
	top := Expand(a, b)
	var got []string
	for _, q := range top.Queues {
		if strings.HasPrefix(q.Name, contract.SharedWaitQueuePrefix) {
			got = append(got, q.Vhost+" "+q.Name)
		}
	}
	if diff := cmp.Diff([]string{"a rmqtopo.wait.10s", "b rmqtopo.wait.10s"}, got); diff != "" {
		t.Errorf("shared wait queues (-want +got):\n%s", diff)
	}
	// x and y in vhost a share it: one binding per retry of each queue, on
	// the attempt the retry becomes.
	var into []string
	for _, bd := range top.Bindings {
		if bd.Vhost == "a" && bd.Destination == "rmqtopo.wait.10s" {
			into = append(into, bd.Source+" "+bd.Arguments["rmqtopo-attempt"].(string))
		}
	}
	if diff := cmp.Diff([]string{"x.retry 2", "y.retry 2", "y.retry 3", "y.retry 4"}, into); diff != "" {
		t.Errorf("bindings into the shared wait queue (-want +got):\n%s", diff)
	}
}

// TestWaitQueuesReturnHome checks, over every example, that each native
// wait queue returns a message to exactly the queue whose retry exchange
// sent it there: per-attempt wait queues name that queue as their
// dead-letter routing key and are fed by its retry exchange only; shared
// wait queues dead-letter to "" keeping the routing key (the contract makes
// it the queue's name) and are fed only by retry exchanges.
func TestWaitQueuesReturnHome(t *testing.T) {
	checked := 0
	for _, path := range examplePaths(t) {
		files, err := LoadFiles(path)
		if err != nil {
			t.Fatal(err)
		}
		top := Expand(files...)
		retryExchangeOf := map[string]string{}
		for _, q := range files[0].Spec.Queues {
			if q.Preset == PresetNone {
				retryExchangeOf[contract.RetryExchange(q.Name)] = q.Name
			}
		}
		for _, w := range top.Queues {
			shared := strings.HasPrefix(w.Name, contract.SharedWaitQueuePrefix)
			perAttempt := strings.Contains(w.Name, ".wait.") && !shared
			if !shared && !perAttempt {
				continue
			}
			checked++
			if dlx, ok := w.Arguments["x-dead-letter-exchange"]; !ok || dlx != "" {
				t.Errorf("%s: wait queue %s dead-letters to %v, want the default exchange", path, w.Name, dlx)
			}
			if _, ok := w.Arguments["x-message-ttl"].(int64); !ok {
				t.Errorf("%s: wait queue %s has no TTL", path, w.Name)
			}
			rk, hasRK := w.Arguments["x-dead-letter-routing-key"]
			if shared && hasRK {
				t.Errorf("%s: shared wait queue %s has x-dead-letter-routing-key %v; it must keep the message's own", path, w.Name, rk)
			}
			sources := 0
			for _, bd := range top.Bindings {
				if bd.Destination != w.Name || bd.DestinationType != topology.DestQueue {
					continue
				}
				sources++
				home, ok := retryExchangeOf[bd.Source]
				if !ok {
					t.Errorf("%s: wait queue %s is fed by %s, which is no queue's retry exchange", path, w.Name, bd.Source)
					continue
				}
				if perAttempt && rk != home {
					t.Errorf("%s: wait queue %s is fed by %s but returns to %v", path, w.Name, bd.Source, rk)
				}
			}
			if sources == 0 {
				t.Errorf("%s: nothing routes into wait queue %s", path, w.Name)
			}
		}
	}
	if checked < 10 {
		t.Errorf("checked only %d wait queues; the examples changed?", checked)
	}
}

// effective is what the broker makes of q's arguments and the policy of
// top that applies to it.
func effective(top topology.Topology, q topology.Queue) topology.Args {
	return topology.EffectiveUnder(q, top.Policies, nil)
}

// TestQuorumArguments checks, over every example, what quorum queues need,
// as arguments or by policy: an explicit delivery limit on every queue that
// is consumed from (wait and delay queues are not), and at-least-once
// dead-lettering (which requires reject-publish) wherever a quorum queue
// dead-letters; and that no classic queue is given quorum-only keys.
func TestQuorumArguments(t *testing.T) {
	for _, path := range examplePaths(t) {
		files, err := LoadFiles(path)
		if err != nil {
			t.Fatal(err)
		}
		top := Expand(files...)
		for _, q := range top.Queues {
			eff := effective(top, q)
			_, dlx := eff["dead-letter-exchange"]
			if q.QueueType() != TypeQuorum {
				for _, k := range []string{"delivery-limit", "dead-letter-strategy"} {
					if _, ok := eff[k]; ok {
						t.Errorf("%s: classic queue %s has %s", path, q.Name, k)
					}
				}
				continue
			}
			if l, ok := eff["delivery-limit"].(int64); !contract.IsWaitQueue(q.Name) && (!ok || l < 1) {
				t.Errorf("%s: quorum queue %s has delivery-limit %v, want an explicit positive limit", path, q.Name, eff["delivery-limit"])
			}
			if dlx && (eff["dead-letter-strategy"] != "at-least-once" || eff["overflow"] != "reject-publish") {
				t.Errorf("%s: quorum queue %s dead-letters without at-least-once + reject-publish: %v", path, q.Name, eff)
			}
		}
	}
}

func TestDeliveryLimit(t *testing.T) {
	f := mustParse(t, "spec.yaml", "version: 1\nqueues:\n  - {name: a, type: quorum}\n  - {name: b, type: quorum, delivery_limit: 3}\n")
	top := Expand(f)
	for name, want := range map[string]int64{"a": DefaultDeliveryLimit, "b": 3, "a.dlq": DeadEndDeliveryLimit, "b.dlq": DeadEndDeliveryLimit} {
		q, ok := top.Queue("/", name)
		if !ok {
			t.Fatalf("no queue %s", name)
		}
		if got := effective(top, q)["delivery-limit"]; got != want {
			t.Errorf("%s: delivery-limit = %v, want %d", name, got, want)
		}
	}
}

// TestContractHeaders checks that no header the contract owns starts with
// "x-" (a headers exchange ignores those when matching), by reading every
// Header* constant of package contract, and that no binding any example
// generates matches on an x- header other than x-match.
func TestContractHeaders(t *testing.T) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "../contract/contract.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var headers []string
	ast.Inspect(file, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, id := range vs.Names {
			if !strings.HasPrefix(id.Name, "Header") || i >= len(vs.Values) {
				continue
			}
			lit, ok := vs.Values[i].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				t.Errorf("%s is not a string literal", id.Name)
				continue
			}
			v, _ := strconv.Unquote(lit.Value)
			headers = append(headers, v)
			if strings.HasPrefix(strings.ToLower(v), "x-") || !strings.HasPrefix(v, "rmqtopo-") {
				t.Errorf("contract.%s = %q; contract headers start with \"rmqtopo-\", never \"x-\"", id.Name, v)
			}
		}
		return true
	})
	if len(headers) < 8 {
		t.Errorf("found %d Header constants in contract.go: %v", len(headers), headers)
	}
	for _, h := range []string{SpringWaitHeader, SpringReturnHeader} {
		if strings.HasPrefix(h, "x-") {
			t.Errorf("spring header %q starts with x-", h)
		}
	}
	for _, path := range examplePaths(t) {
		files, err := LoadFiles(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, bd := range Expand(files...).Bindings {
			for k := range bd.Arguments {
				if k != "x-match" && strings.HasPrefix(k, "x-") {
					t.Errorf("%s: binding %s matches on %q, which a headers exchange ignores", path, bd.Addr(), k)
				}
			}
		}
	}
}

// TestExpandIsDeterministic expands the examples repeatedly, with queues,
// exchanges and files in shuffled order, and wants the same topology, and
// the spec left untouched.
func TestExpandIsDeterministic(t *testing.T) {
	var files []*File
	vhosts := map[string]bool{}
	for _, path := range examplePaths(t) {
		fs, err := LoadFiles(path)
		if err != nil {
			t.Fatal(err)
		}
		// Examples all describe "/"; give each its own vhost so that they
		// can be expanded together.
		f := fs[0]
		f.Spec.Vhost = strings.TrimSuffix(strings.TrimPrefix(path, "../examples/"), ".yaml")
		vhosts[f.Spec.Vhost] = true
		files = append(files, f)
	}
	opts := cmp.AllowUnexported(Spec{}, Exchange{}, Binding{}, Queue{}, PresetOptions{}, Policy{}, pos{}, keyAt{}, resolution{})
	before := cloneFiles(files)
	want := Expand(files...)
	if diff := cmp.Diff(before, files, opts); diff != "" {
		t.Fatalf("Expand changed its input (-before +after):\n%s", diff)
	}
	if len(want.Vhosts) != len(vhosts) {
		t.Fatalf("Expand gave vhosts %v", want.Vhosts)
	}
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 20; i++ {
		shuffled := cloneFiles(files)
		rng.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		for _, f := range shuffled {
			qs, es := f.Spec.Queues, f.Spec.Exchanges
			rng.Shuffle(len(qs), func(a, b int) { qs[a], qs[b] = qs[b], qs[a] })
			rng.Shuffle(len(es), func(a, b int) { es[a], es[b] = es[b], es[a] })
		}
		if diff := cmp.Diff(want, Expand(shuffled...)); diff != "" {
			t.Fatalf("shuffle %d: Expand differs (-first +shuffled):\n%s", i, diff)
		}
	}
}

func cloneFiles(files []*File) []*File {
	out := make([]*File, len(files))
	for i, f := range files {
		c := *f
		c.Spec.Queues = append([]Queue(nil), f.Spec.Queues...)
		c.Spec.Exchanges = append([]Exchange(nil), f.Spec.Exchanges...)
		out[i] = &c
	}
	return out
}

func TestCollisions(t *testing.T) {
	tests := []struct {
		name string
		spec string
		want []string // messages; empty means no collision
	}{
		{
			name: "queues sharing a shared wait queue do not collide",
			spec: "version: 1\nqueues:\n  - {name: a, retry: {delays: [5s]}}\n  - {name: b, retry: {delays: [5s, 5s]}}\n",
		},
		{
			name: "spring queues share the wait and return exchanges",
			spec: "version: 1\nqueues:\n  - {name: a, preset: spring, retry: {delays: [5s]}}\n  - {name: b, preset: spring, retry: {delays: [5s]}}\n",
		},
		{
			name: "a queue may be named like another queue's retry exchange",
			spec: "version: 1\nqueues:\n  - {name: a}\n  - {name: a.retry}\n",
		},
		{
			name: "a queue may be named like the DLQ of a queue without one",
			spec: "version: 1\nqueues:\n  - {name: a, dlq: false}\n  - {name: a.dlq, dlq: false}\n",
		},
		{
			name: "declared exchange named like the spring wait exchange",
			spec: "version: 1\nexchanges:\n  - {name: wait, type: direct}\nqueues:\n  - {name: a, preset: spring, retry: {delays: [5s]}}\n",
			want: []string{`exchange "wait" (generated as the vhost's spring wait exchange) collides with the exchange declared at exchanges[0]`},
		},
		{
			name: "queue named like a goqueue retry queue",
			spec: "version: 1\nqueues:\n  - {name: a, preset: goqueue, retry: {delays: [5s]}}\n  - {name: a__retry.1, dlq: false}\n",
			want: []string{`queue "a__retry.1" (generated for queue "a" as its goqueue retry queue 1) collides with the queue declared at queues[1]`},
		},
		{
			name: "spring wait queue colliding with a declared queue",
			spec: "version: 1\nqueues:\n  - {name: wait-queue-5000, dlq: false}\n  - {name: a, preset: spring, retry: {delays: [5s]}}\n",
			want: []string{`queue "wait-queue-5000" (generated as the vhost's spring wait queue for 5s) collides with the queue declared at queues[0]`},
		},
		{
			name: "queue named like another queue's parking lot",
			spec: "version: 1\nqueues:\n  - {name: a, parking_lot: true}\n  - {name: a.parking-lot, dlq: false}\n",
			want: []string{`queue "a.parking-lot" (generated for queue "a" as its parking lot) collides with the queue declared at queues[1]`},
		},
		{
			name: "a declared queue wins over a generated one wherever it is declared",
			spec: "version: 1\nqueues:\n  - {name: a, layout: per-attempt, retry: {delays: [1s]}}\n  - {name: b}\n  - {name: a.wait.1.1s}\n",
			want: []string{`queue "a.wait.1.1s" (generated for queue "a" as its wait queue for retry 1) collides with the queue declared at queues[2]`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("spec.yaml", []byte(tt.spec))
			var got []string
			if err != nil {
				for _, e := range mustFail(t, "spec.yaml", tt.spec) {
					got = append(got, e.Message)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}
