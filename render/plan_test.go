package render_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/cmd/rmqtopo/flagwords"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/plan/planjson"
	"github.com/rmqtopo/rmqtopo/render"
	"github.com/rmqtopo/rmqtopo/topology"
)

// update rewrites the golden files from the current output:
// go test ./render/ -update, then review the diff.
var update = flag.Bool("update", false, "rewrite golden files in testdata")

// The plans are diffed from hand-written topologies rather than expanded
// specs, so a change to spec expansion does not churn these goldens.

func exchange(name, typ string, args topology.Args) topology.Exchange {
	return topology.Exchange{Vhost: "/", Name: name, Type: typ, Durable: true, Arguments: args}
}

func queue(name string, args topology.Args) topology.Queue {
	return topology.Queue{Vhost: "/", Name: name, Durable: true, Arguments: args}
}

func bind(source, dest, key string, args topology.Args) topology.Binding {
	return topology.Binding{Vhost: "/", Source: source, Destination: dest, DestinationType: topology.DestQueue,
		RoutingKey: key, Arguments: args}
}

func attempt(n string) topology.Args { return topology.Args{"x-match": "all", "rmqtopo-attempt": n} }

func waitQueue(name string, ttl int64) topology.Queue {
	return queue(name, topology.Args{"x-queue-type": "quorum", "x-delivery-limit": int64(20), "x-message-ttl": ttl,
		"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "orders",
		"x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish"})
}

// orders is a native topology: orders bound to shop, retried once at once
// and then after 10s and 1m, with a DLQ and a policy.
func orders(delay2 string, ttl2 int64) topology.Topology {
	wait2 := "orders.wait.3." + delay2
	t := topology.Topology{
		Vhosts: []string{"/"},
		Exchanges: []topology.Exchange{
			exchange("shop", "topic", nil),
			exchange("orders.retry", "headers", topology.Args{"alternate-exchange": "orders.dlx"}),
			exchange("orders.dlx", "fanout", nil),
		},
		Queues: []topology.Queue{
			queue("orders", topology.Args{"x-queue-type": "quorum", "x-delivery-limit": int64(20),
				"x-dead-letter-exchange": "orders.dlx", "x-dead-letter-strategy": "at-least-once",
				"x-overflow": "reject-publish", "x-message-ttl": int64(3600000)}),
			queue("orders.dlq", topology.Args{"x-queue-type": "quorum", "x-delivery-limit": int64(1000000)}),
			waitQueue("orders.wait.2.10s", 10000),
			waitQueue(wait2, ttl2),
		},
		Bindings: []topology.Binding{
			bind("shop", "orders", "order.created", nil),
			bind("orders.dlx", "orders.dlq", "", nil),
			bind("orders.retry", "orders", "", attempt("1")),
			bind("orders.retry", "orders.wait.2.10s", "", attempt("2")),
			bind("orders.retry", wait2, "", attempt("3")),
		},
		Policies: []topology.Policy{{Vhost: "/", Name: "orders-limits", Pattern: "^orders$", ApplyTo: "queues",
			Definition: topology.Args{"max-length": int64(100000)}}},
	}
	t.Sort()
	return t
}

func owned(t topology.Topology) map[topology.Address]bool {
	m := map[topology.Address]bool{}
	for _, e := range t.Exchanges {
		m[e.Addr()] = true
	}
	for _, q := range t.Queues {
		m[q.Addr()] = true
	}
	for _, b := range t.Bindings {
		m[b.Addr()] = true
	}
	for _, p := range t.Policies {
		m[p.Addr()] = true
	}
	return m
}

func queueAddr(name string) topology.Address {
	return topology.Address{Kind: topology.KindQueue, Vhost: "/", Name: name}
}

func isWaitQueue(name string) bool { return strings.HasPrefix(name, "orders.wait.") }

type planCase struct {
	name  string
	plan  plan.Plan
	diags []plan.Diagnostic
}

func planCases() []planCase {
	cur := orders("1m", 60000)
	all := owned(cur)
	var cases []planCase
	add := func(name string, live, desired topology.Topology, opts plan.Options, check plan.CheckOptions) {
		p := plan.DiffTopology(live, desired, opts)
		cases = append(cases, planCase{name: name, plan: p, diags: flagwords.Diagnostics(plan.Check(p, check))})
	}

	add("empty", cur, cur, plan.Options{Owned: all}, plan.CheckOptions{})
	// A clean plan still says which version it was judged for.
	cases[len(cases)-1].plan.RabbitMQ = &plan.Judged{Version: "4.0.5", From: "broker"}

	small := topology.Topology{
		Vhosts:    []string{"/"},
		Exchanges: []topology.Exchange{exchange("shop", "topic", nil), exchange("orders.dlx", "fanout", nil)},
		Queues: []topology.Queue{
			queue("orders", topology.Args{"x-dead-letter-exchange": "orders.dlx"}),
			queue("orders.dlq", nil),
		},
		Bindings: []topology.Binding{bind("shop", "orders", "order.*", nil), bind("orders.dlx", "orders.dlq", "", nil)},
	}
	small.Sort()
	add("greenfield", topology.Topology{}, small, plan.Options{}, plan.CheckOptions{})

	ttl := orders("1m", 60000)
	ttl.Queues[0].Arguments = topology.Args{}
	for k, v := range cur.Queues[0].Arguments {
		ttl.Queues[0].Arguments[k] = v
	}
	ttl.Queues[0].Arguments["x-message-ttl"] = int64(1800000)
	add("replace-with-messages", cur, ttl, plan.Options{Owned: all,
		Messages: map[topology.Address]int64{queueAddr("orders"): 42}}, plan.CheckOptions{})

	add("schedule-change", cur, orders("2m", 120000), plan.Options{Owned: all, IsWaitQueue: isWaitQueue,
		Messages: map[topology.Address]int64{queueAddr("orders.wait.3.1m"): 17}}, plan.CheckOptions{})

	// The same change once the old wait queue is empty: routine, nothing
	// destructive to headline.
	add("schedule-change-empty", cur, orders("2m", 120000), plan.Options{Owned: all, IsWaitQueue: isWaitQueue,
		Messages:  map[topology.Address]int64{queueAddr("orders.wait.3.1m"): 0},
		Consumers: map[topology.Address]int64{queueAddr("orders.wait.3.1m"): 0}}, plan.CheckOptions{})

	pruned := orders("1m", 60000)
	pruned.Queues = pruned.Queues[:1] // orders only: no DLQ, no wait queues
	pruned.Exchanges = []topology.Exchange{exchange("shop", "topic", nil)}
	pruned.Bindings = []topology.Binding{bind("shop", "orders", "order.created", nil)}
	pruned.Policies = nil
	pruned.Queues[0].Arguments = topology.Args{"x-queue-type": "quorum", "x-delivery-limit": int64(20),
		"x-dead-letter-exchange": "orders.dlx", "x-dead-letter-strategy": "at-least-once",
		"x-overflow": "reject-publish", "x-message-ttl": int64(3600000)}
	add("prune-delete", cur, pruned, plan.Options{Prune: true, Owned: all, IsWaitQueue: isWaitQueue,
		Messages: map[topology.Address]int64{queueAddr("orders.dlq"): 3, queueAddr("orders.wait.2.10s"): 0,
			queueAddr("orders.wait.3.1m"): 0}}, plan.CheckOptions{AllowDestroy: true})

	pol := orders("1m", 60000)
	pol.Policies[0].Pattern = "^orders(\\.dlq)?$"
	pol.Policies[0].Priority = 10
	pol.Policies[0].Definition = topology.Args{"max-length": int64(50000), "overflow": "reject-publish"}
	add("policy-update", cur, pol, plan.Options{Owned: all}, plan.CheckOptions{})

	retyped := orders("1m", 60000)
	for i, e := range retyped.Exchanges {
		if e.Name == "shop" {
			retyped.Exchanges[i].Type = "direct"
		}
	}
	add("exchange-replace", cur, retyped, plan.Options{Owned: all}, plan.CheckOptions{})

	quorum := small
	quorum.Queues = []topology.Queue{
		queue("orders", topology.Args{"x-dead-letter-exchange": "orders.dlx", "x-queue-type": "quorum"}),
		queue("orders.dlq", nil),
	}
	add("migrate", small, quorum, plan.Options{Owned: owned(small), Migrate: plan.Migration{All: true},
		Messages: map[topology.Address]int64{queueAddr("orders"): 42}, Consumers: map[topology.Address]int64{queueAddr("orders"): 2}},
		plan.CheckOptions{})
	return cases
}

// cliText and cliMarkdown are the CLI's options (cmd/rmqtopo/plan.go):
// the golden files show the plan as the CLI words it.
func cliText(color bool) render.TextOptions {
	return render.TextOptions{Color: color, VersionFlag: flagwords.RabbitMQVersion}
}

var cliMarkdown = render.MarkdownOptions{SeeAll: flagwords.MarkdownSeeAll, VersionFlag: flagwords.RabbitMQVersion}

// The header says which version the plan is judged for and where it came
// from, in the CLI's words for its flag; a caller with no flag gets
// neutral words (render names no flag itself). Text and Markdown agree.
func TestPlanHeaderJudged(t *testing.T) {
	for _, c := range []struct {
		judged       plan.Judged
		cli, neutral string
	}{
		{plan.Judged{Version: "4.3.0", From: plan.FromOverride},
			"Judged for RabbitMQ 4.3.0 (--rabbitmq-version).", "Judged for RabbitMQ 4.3.0 (the version given)."},
		{plan.Judged{Version: "4.0.5", From: plan.FromBroker},
			"Judged for RabbitMQ 4.0.5 (the broker's version).", "Judged for RabbitMQ 4.0.5 (the broker's version)."},
		{plan.Judged{Version: "4.0.5", From: plan.FromExport},
			"Judged for RabbitMQ 4.0.5 (the export's rabbit_version).", "Judged for RabbitMQ 4.0.5 (the export's rabbit_version)."},
		{plan.Judged{From: plan.FromNone},
			"RabbitMQ version unknown: the checks that depend on it are skipped (give --rabbitmq-version).",
			"RabbitMQ version unknown: the checks that depend on it are skipped."},
		{plan.Judged{Version: "3.13.7"}, "Judged for RabbitMQ 3.13.7.", "Judged for RabbitMQ 3.13.7."},
	} {
		p := plan.Plan{RabbitMQ: &c.judged}
		for _, o := range []struct {
			text render.TextOptions
			md   render.MarkdownOptions
			want string
		}{{cliText(false), cliMarkdown, c.cli}, {render.TextOptions{}, render.MarkdownOptions{}, c.neutral}} {
			var text, md bytes.Buffer
			if err := render.PlanText(&text, p, nil, o.text); err != nil {
				t.Fatal(err)
			}
			if err := render.PlanMarkdown(&md, p, nil, o.md); err != nil {
				t.Fatal(err)
			}
			if first := strings.SplitN(text.String(), "\n", 2)[0]; first != o.want {
				t.Errorf("%+v, flag %q: text header %q, want %q", c.judged, o.text.VersionFlag, first, o.want)
			}
			// Markdown escapes the underscore of rabbit_version.
			if mdWant := strings.ReplaceAll(o.want, "_", `\_`); !strings.Contains(md.String(), "\n\n"+mdWant+"\n\n") {
				t.Errorf("%+v, flag %q: Markdown lacks %q:\n%s", c.judged, o.md.VersionFlag, mdWant, md.String())
			}
		}
	}
}

func TestPlanGolden(t *testing.T) {
	for _, c := range planCases() {
		t.Run(c.name, func(t *testing.T) {
			var text, color, js, md bytes.Buffer
			if err := render.PlanText(&text, c.plan, c.diags, cliText(false)); err != nil {
				t.Fatal(err)
			}
			if err := render.PlanText(&color, c.plan, c.diags, cliText(true)); err != nil {
				t.Fatal(err)
			}
			if err := render.PlanJSON(&js, c.plan, c.diags); err != nil {
				t.Fatal(err)
			}
			if err := render.PlanMarkdown(&md, c.plan, c.diags, cliMarkdown); err != nil {
				t.Fatal(err)
			}
			golden(t, c.name+".txt.golden", text.Bytes())
			golden(t, c.name+".color.golden", color.Bytes())
			golden(t, c.name+".json.golden", js.Bytes())
			golden(t, c.name+".md.golden", md.Bytes())
		})
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "plan", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./render/ -update to create it)", err)
	}
	// Compared line by line so a failure shows which lines changed.
	if diff := cmp.Diff(strings.Split(string(want), "\n"), strings.Split(string(got), "\n")); diff != "" {
		t.Errorf("%s differs (-want +got); run go test ./render/ -update if the change is intended:\n%s", path, diff)
	}
}

// The JSON is the format tools rely on: versioned, no-ops left out but
// counted, and decodable back into the plan's own types.
func TestPlanJSONShape(t *testing.T) {
	for _, c := range planCases() {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := render.PlanJSON(&buf, c.plan, c.diags); err != nil {
				t.Fatal(err)
			}
			var top map[string]json.RawMessage
			if err := json.Unmarshal(buf.Bytes(), &top); err != nil {
				t.Fatal(err)
			}
			for k := range top {
				if !slices.Contains([]string{"format_version", "rabbitmq", "changes", "diagnostics", "summary"}, k) {
					t.Errorf("unknown field %q", k)
				}
			}
			if v := string(top["format_version"]); v != strconv.Itoa(planjson.FormatVersion) {
				t.Errorf("format_version = %s, want %d", v, planjson.FormatVersion)
			}
			var doc planjson.Document
			if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.plan.RabbitMQ, doc.RabbitMQ); diff != "" {
				t.Errorf("rabbitmq (-want +got):\n%s", diff)
			}
			var want []plan.Change
			for _, ch := range c.plan.Changes {
				if ch.Action != plan.NoOp {
					want = append(want, ch)
				}
			}
			// JSON numbers decode as float64; compare what survives the trip.
			if diff := cmp.Diff(addresses(want), addresses(doc.Changes)); diff != "" {
				t.Errorf("changes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.plan.CountActions(), doc.Summary); diff != "" {
				t.Errorf("summary (-want +got):\n%s", diff)
			}
			if len(doc.Diagnostics) != len(c.diags) {
				t.Errorf("%d diagnostics, want %d", len(doc.Diagnostics), len(c.diags))
			}
		})
	}
}

func addresses(cs []plan.Change) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.Action.String()+" "+c.Address.String())
	}
	return out
}
