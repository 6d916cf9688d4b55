package render

import (
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/topology"
)

// node kinds of the flow graph.
const (
	nodeExchange = "exchange"
	nodeQueue    = "queue"
)

type node struct {
	id, label, kind string
}

type edge struct {
	from, to, label string
	dashed          bool
}

// graph is the message flow of a topology: bindings, dead-lettering,
// alternate exchanges and the contract's exhaustion path, derived from the
// topology alone so presets and hand-written topologies draw too.
type graph struct {
	nodes []node
	edges []edge
}

func flow(t topology.Topology) graph {
	t = collapseLadders(t)
	var g graph
	ids := map[string]string{}
	id := func(vhost, kind, name string) string {
		key := vhost + "\x00" + kind + "\x00" + name
		if v, ok := ids[key]; ok {
			return v
		}
		v := fmt.Sprintf("%s%d", kind[:1], len(ids))
		ids[key] = v
		return v
	}
	multiVhost := len(t.Vhosts) > 1
	label := func(vhost, name string) string {
		if multiVhost {
			return vhost + " " + name
		}
		return name
	}
	for _, e := range t.Exchanges {
		g.nodes = append(g.nodes, node{id(e.Vhost, nodeExchange, e.Name), label(e.Vhost, e.Name) + " (" + e.Type + ")", nodeExchange})
	}
	for _, q := range t.Queues {
		g.nodes = append(g.nodes, node{id(q.Vhost, nodeQueue, q.Name), label(q.Vhost, q.Name), nodeQueue})
	}
	exists := func(vhost, kind, name string) bool {
		_, ok := ids[vhost+"\x00"+kind+"\x00"+name]
		return ok
	}
	for _, b := range t.Bindings {
		if !exists(b.Vhost, nodeExchange, b.Source) {
			g.nodes = append(g.nodes, node{id(b.Vhost, nodeExchange, b.Source), label(b.Vhost, b.Source), nodeExchange})
		}
		kind := nodeQueue
		if b.DestinationType == topology.DestExchange {
			kind = nodeExchange
		}
		g.edges = append(g.edges, edge{from: id(b.Vhost, nodeExchange, b.Source), to: id(b.Vhost, kind, b.Destination), label: bindingLabel(b)})
	}
	g.edges = append(g.edges, unmatchedEdges(t, id, exists)...)
	for _, q := range t.Queues {
		if label, ok := nativeLabel(q); ok {
			at := id(q.Vhost, nodeQueue, q.Name)
			g.edges = append(g.edges, edge{from: at, to: at, label: label, dashed: true})
		}
	}
	for _, q := range t.Queues {
		// What the broker makes of the queue's arguments and its policy.
		eff := topology.EffectiveUnder(q, t.Policies, nil)
		dlx, ok := eff["dead-letter-exchange"].(string)
		if !ok {
			continue
		}
		why := "dead-letter"
		if ttl, ok := eff["message-ttl"].(int64); ok {
			why = "after " + HumanDurationMs(ttl)
		}
		from := id(q.Vhost, nodeQueue, q.Name)
		if dlx != "" {
			if !exists(q.Vhost, nodeExchange, dlx) {
				g.nodes = append(g.nodes, node{id(q.Vhost, nodeExchange, dlx), label(q.Vhost, dlx), nodeExchange})
			}
			g.edges = append(g.edges, edge{from: from, to: id(q.Vhost, nodeExchange, dlx), label: why, dashed: true})
			continue
		}
		if rk, ok := eff["dead-letter-routing-key"].(string); ok {
			if exists(q.Vhost, nodeQueue, rk) {
				g.edges = append(g.edges, edge{from: from, to: id(q.Vhost, nodeQueue, rk), label: why, dashed: true})
			}
			continue
		}
		// Dead-lettered to "" keeping the routing key: back to whichever
		// work queue's retry exchange routed the message here.
		for _, w := range returnsTo(t, q) {
			g.edges = append(g.edges, edge{from: from, to: id(q.Vhost, nodeQueue, w), label: why + ", by routing key", dashed: true})
		}
	}
	g.edges = dedupe(g.edges)
	return g
}

// nativeLabel describes the retries a queue of the native layout delays
// itself (contract.Native): the broker's linear delay, or the delays a
// client asks per message over AMQP 1.0.
func nativeLabel(q topology.Queue) (string, bool) {
	n, err := contract.ParseNative(q.Arguments)
	if err != nil {
		return "", false
	}
	words := make([]string, len(n.Delays))
	for i, d := range n.Delays {
		words[i] = contract.FormatDelay(d)
	}
	how := "reject"
	if n.Route == contract.RouteModified {
		how = "AMQP 1.0"
		if n.Jitter {
			how += ", jitter"
		}
	}
	return fmt.Sprintf("%d retries in queue: %s (%s)", n.DeliveryLimit, strings.Join(words, ", "), how), true
}

// returnsTo names the queues to which wait queue q returns messages by
// their routing key: for each work queue whose retry exchange routes into
// q, its return queue where it has one (its clients then publish retries
// with that routing key; contract.ReturnQueue), else the work queue.
func returnsTo(t topology.Topology, q topology.Queue) []string {
	var out []string
	for _, b := range t.Bindings {
		if b.Vhost != q.Vhost || b.Destination != q.Name || b.DestinationType != topology.DestQueue {
			continue
		}
		for _, w := range t.Queues {
			if w.Vhost == q.Vhost && contract.RetryExchange(w.Name) == b.Source {
				to := w.Name
				if _, ok := t.Queue(w.Vhost, contract.ReturnQueue(w.Name)); ok {
					to = contract.ReturnQueue(w.Name)
				}
				out = append(out, to)
			}
		}
	}
	return out
}

func dedupe(es []edge) []edge {
	seen := map[edge]bool{}
	out := es[:0]
	for _, e := range es {
		if !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	return out
}

// HumanDurationMs renders a millisecond count like HumanDuration.
func HumanDurationMs(ms int64) string { return contract.FormatDelay(msDuration(ms)) }

func bindingLabel(b topology.Binding) string {
	var parts []string
	if b.RoutingKey != "" {
		parts = append(parts, b.RoutingKey)
	}
	keys := make([]string, 0, len(b.Arguments))
	for k := range b.Arguments {
		if k != "x-match" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		name := k
		if k == contract.HeaderAttempt {
			name = "attempt"
		}
		parts = append(parts, fmt.Sprintf("%s=%v", name, b.Arguments[k]))
	}
	return strings.Join(parts, " ")
}

// unmatchedEdges are where messages go that no binding routes: an
// exchange's alternate exchange, and, for a retry exchange without one,
// the contract's exhaustion path (the copy is returned and the service
// sends it to the DLX).
func unmatchedEdges(t topology.Topology, id func(vhost, kind, name string) string, exists func(vhost, kind, name string) bool) []edge {
	var edges []edge
	hasAE := map[string]bool{}
	for _, e := range t.Exchanges {
		if ae, ok := alternateExchange(e, t.Policies); ok && exists(e.Vhost, nodeExchange, ae) {
			hasAE[e.Vhost+"\x00"+e.Name] = true
			edges = append(edges, edge{from: id(e.Vhost, nodeExchange, e.Name), to: id(e.Vhost, nodeExchange, ae), label: "unmatched", dashed: true})
		}
	}
	for _, q := range t.Queues {
		rx, dlx := contract.RetryExchange(q.Name), contract.DeadLetterExchange(q.Name)
		if exists(q.Vhost, nodeExchange, rx) && exists(q.Vhost, nodeExchange, dlx) && !hasAE[q.Vhost+"\x00"+rx] {
			edges = append(edges, edge{from: id(q.Vhost, nodeExchange, rx), to: id(q.Vhost, nodeExchange, dlx),
				label: "exhausted: returned, the service dead-letters", dashed: true})
		}
	}
	return edges
}

// Mermaid writes the flow as a Mermaid flowchart.
func Mermaid(w io.Writer, t topology.Topology) error {
	g := flow(t)
	var b strings.Builder
	b.WriteString("flowchart LR\n")
	for _, n := range g.nodes {
		if n.kind == nodeExchange {
			fmt.Fprintf(&b, "  %s{{%s}}\n", n.id, mermaidText(n.label))
		} else {
			fmt.Fprintf(&b, "  %s[(%s)]\n", n.id, mermaidText(n.label))
		}
	}
	for _, e := range g.edges {
		arrow := "-->"
		if e.dashed {
			arrow = "-.->"
		}
		if e.label != "" {
			fmt.Fprintf(&b, "  %s %s|%s| %s\n", e.from, arrow, mermaidText(e.label), e.to)
		} else {
			fmt.Fprintf(&b, "  %s %s %s\n", e.from, arrow, e.to)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Dot writes the flow as a Graphviz digraph.
func Dot(w io.Writer, t topology.Topology) error {
	g := flow(t)
	var b strings.Builder
	b.WriteString("digraph rmqtopo {\n  rankdir=LR;\n  node [fontname=\"Helvetica\"];\n")
	for _, n := range g.nodes {
		shape := "cylinder"
		if n.kind == nodeExchange {
			shape = "hexagon"
		}
		fmt.Fprintf(&b, "  %s [label=%s, shape=%s];\n", n.id, dotText(n.label), shape)
	}
	for _, e := range g.edges {
		attrs := []string{}
		if e.label != "" {
			attrs = append(attrs, "label="+dotText(e.label))
		}
		if e.dashed {
			attrs = append(attrs, "style=dashed")
		}
		fmt.Fprintf(&b, "  %s -> %s [%s];\n", e.from, e.to, strings.Join(attrs, ", "))
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// mermaidText quotes a label for Mermaid, which has no backslash escapes:
// a double quote must be written as the entity #quot;.
func mermaidText(s string) string {
	return `"` + strings.NewReplacer(`"`, "#quot;", "\n", " ").Replace(s) + `"`
}

// dotText quotes a label for Graphviz, whose strings escape only the double
// quote and the backslash (Go's %q would also escape non-ASCII names).
func dotText(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", " ").Replace(s) + `"`
}

// alternateExchange returns e's alternate exchange: its argument, or else
// that of the exchange policy of highest priority that matches it.
func alternateExchange(e topology.Exchange, ps []topology.Policy) (string, bool) {
	if ae, ok := e.Arguments["alternate-exchange"].(string); ok {
		return ae, true
	}
	var best *topology.Policy
	for i, p := range ps {
		if p.Vhost != e.Vhost || (p.ApplyTo != "exchanges" && p.ApplyTo != "all") {
			continue
		}
		if re, err := regexp.Compile(p.Pattern); err != nil || !re.MatchString(e.Name) {
			continue
		}
		if best == nil || p.Priority > best.Priority {
			best = &ps[i]
		}
	}
	if best == nil {
		return "", false
	}
	ae, ok := best.Definition["alternate-exchange"].(string)
	return ae, ok
}
