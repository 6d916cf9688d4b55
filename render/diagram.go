package render

import (
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/english"
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
	b := &flowBuilder{ids: map[string]string{}, multiVhost: len(t.Vhosts) > 1}
	schedules := map[topology.Address]topology.Args{}
	for _, e := range t.Exchanges {
		if e.Name == contract.ScheduleExchange {
			continue // it carries schedules, not messages: the queue's own edge shows it
		}
		b.g.nodes = append(b.g.nodes, node{b.id(e.Vhost, nodeExchange, e.Name), b.label(e.Vhost, e.Name) + " (" + e.Type + ")", nodeExchange})
	}
	for _, q := range t.Queues {
		b.g.nodes = append(b.g.nodes, node{b.id(q.Vhost, nodeQueue, q.Name), b.label(q.Vhost, q.Name), nodeQueue})
	}
	for _, bd := range t.Bindings {
		if bd.Source == contract.ScheduleExchange && bd.DestinationType == topology.DestQueue && bd.RoutingKey == bd.Destination {
			schedules[topology.Address{Kind: topology.KindQueue, Vhost: bd.Vhost, Name: bd.Destination}] = bd.Arguments
			continue
		}
		b.ensureExchange(bd.Vhost, bd.Source)
		kind := nodeQueue
		if bd.DestinationType == topology.DestExchange {
			kind = nodeExchange
		}
		b.g.edges = append(b.g.edges, edge{from: b.id(bd.Vhost, nodeExchange, bd.Source), to: b.id(bd.Vhost, kind, bd.Destination), label: bindingLabel(bd)})
	}
	b.g.edges = append(b.g.edges, unmatchedEdges(t, b.id, b.exists)...)
	for _, q := range t.Queues {
		if label, ok := nativeLabel(q, schedules[q.Addr()]); ok {
			at := b.id(q.Vhost, nodeQueue, q.Name)
			b.g.edges = append(b.g.edges, edge{from: at, to: at, label: label, dashed: true})
		}
	}
	for _, q := range t.Queues {
		b.deadLetterEdges(t, q)
	}
	b.g.edges = dedupe(b.g.edges)
	return b.g
}

// flowBuilder gives each (vhost, kind, name) one node id as flow draws.
type flowBuilder struct {
	g          graph
	ids        map[string]string
	multiVhost bool
}

func (b *flowBuilder) id(vhost, kind, name string) string {
	key := vhost + "\x00" + kind + "\x00" + name
	if v, ok := b.ids[key]; ok {
		return v
	}
	v := fmt.Sprintf("%s%d", kind[:1], len(b.ids))
	b.ids[key] = v
	return v
}

func (b *flowBuilder) exists(vhost, kind, name string) bool {
	_, ok := b.ids[vhost+"\x00"+kind+"\x00"+name]
	return ok
}

// label names an object, with its vhost where the drawing has several.
func (b *flowBuilder) label(vhost, name string) string {
	if b.multiVhost {
		return vhost + " " + name
	}
	return name
}

// ensureExchange draws an exchange the topology names but does not declare.
func (b *flowBuilder) ensureExchange(vhost, name string) {
	if !b.exists(vhost, nodeExchange, name) {
		b.g.nodes = append(b.g.nodes, node{b.id(vhost, nodeExchange, name), b.label(vhost, name), nodeExchange})
	}
}

// deadLetterEdges draws where q dead-letters to, as the broker makes of
// its arguments and its policy.
func (b *flowBuilder) deadLetterEdges(t topology.Topology, q topology.Queue) {
	eff := topology.EffectiveUnder(q, t.Policies, nil)
	dlx, ok := eff["dead-letter-exchange"].(string)
	if !ok {
		return
	}
	why := "dead-letter"
	if ttl, ok := eff["message-ttl"].(int64); ok {
		why = "after " + HumanDurationMs(ttl)
	}
	from := b.id(q.Vhost, nodeQueue, q.Name)
	if dlx != "" {
		b.ensureExchange(q.Vhost, dlx)
		b.g.edges = append(b.g.edges, edge{from: from, to: b.id(q.Vhost, nodeExchange, dlx), label: why, dashed: true})
		return
	}
	if rk, ok := eff["dead-letter-routing-key"].(string); ok {
		if b.exists(q.Vhost, nodeQueue, rk) {
			b.g.edges = append(b.g.edges, edge{from: from, to: b.id(q.Vhost, nodeQueue, rk), label: why, dashed: true})
		}
		return
	}
	// Dead-lettered to "" keeping the routing key: back to whichever
	// work queue's retry exchange routed the message here.
	for _, w := range returnsTo(t, q) {
		b.g.edges = append(b.g.edges, edge{from: from, to: b.id(q.Vhost, nodeQueue, w), label: why + ", by routing key", dashed: true})
	}
}

// nativeLabel describes the retries a queue of the native layout delays
// itself (contract.Native): the broker's linear delay, or the delays a
// client asks per message over AMQP 1.0. schedule is its schedule
// binding's arguments, nil if it has none.
func nativeLabel(q topology.Queue, schedule topology.Args) (string, bool) {
	n, err := contract.NativeOf(q.Arguments, schedule)
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
	return fmt.Sprintf("%s in queue: %s (%s)", english.Count(n.DeliveryLimit, "retry", "retries"), strings.Join(words, ", "), how), true
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
