package importer

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/english"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

// yaml writes the model as a spec. Everything is in a fixed order (objects
// by name, keys in the order docs/spec.md lists them, defaults left out)
// and nothing in it depends on the time, so importing the same state twice
// gives the same bytes.
func (m *model) yaml(source string) []byte {
	root := mapping()
	root.HeadComment = m.header(source)
	add(root, "version", scalar(spec.Version))
	if name := m.name(); name != "" {
		add(root, "name", scalar(name))
		root.Content[len(root.Content)-2].HeadComment = "The spec the vhost's ownership record names: plan and apply act for it."
	}
	add(root, "vhost", scalar(m.l.vhost))
	if ld := m.l.ladder; ld != nil {
		add(root, "levels", levelsNode(ld))
		root.Content[len(root.Content)-2].HeadComment = fmt.Sprintf(
			"The vhost's delay ladder: %s.\nThe broker holds the number of levels, not max: %s is a round max\nthat gives the same ladder.",
			ld.l, contract.FormatDelay(ld.levels.Max))
	}
	if m.needsWaitQueueType() {
		add(root, "wait_queue_type", scalar(m.l.waitQueueType))
	}
	if len(m.exchanges) > 0 {
		seq := sequence()
		for _, o := range m.exchanges {
			seq.Content = append(seq.Content, exchangeNode(o))
		}
		add(root, "exchanges", seq)
	}
	if len(m.queues) > 0 {
		seq := sequence()
		for _, o := range m.queues {
			seq.Content = append(seq.Content, queueNode(o))
		}
		add(root, "queues", seq)
	}
	if len(m.policies) > 0 {
		seq := sequence()
		for _, p := range m.policies {
			seq.Content = append(seq.Content, policyNode(p))
		}
		add(root, "policies", seq)
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root}}); err != nil {
		// Every node is built from plain values; encoding cannot fail.
		panic(fmt.Sprintf("import: encode spec: %v", err))
	}
	return buf.Bytes()
}

func (m *model) header(source string) string {
	lines := []string{fmt.Sprintf("Imported by rmqtopo import from %s, vhost %q.", source, m.l.vhost)}
	if n := m.adoptedCount(); n > 0 {
		lines = append(lines, fmt.Sprintf("It adopts %s: planned against the same source it", english.Count(n, "hand-made retry scheme", "hand-made retry schemes")),
			"gives them rmqtopo's retry topology and retires their TTL queues (see the queues' comments);",
			"every other object plans no change.")
	} else {
		lines = append(lines, "Planning this spec against the same source shows no changes.")
	}
	if m.unrecorded() {
		lines = append(lines, "", "The vhost holds what rmqtopo applies, but the source has no ownership record (a RabbitMQ",
			"4.3 export leaves them out): if a spec applied it, set name to that spec's.")
	}
	if len(m.specs) > 1 {
		lines = append(lines, "", fmt.Sprintf("The vhost holds the ownership records of %d specs (%s): this spec describes",
			len(m.specs), quoteAll(m.specs)), "all of it and names none of them. Split it into one spec per name before applying it.")
	}
	if sk := m.sortedSkipped(); len(sk) > 0 {
		lines = append(lines, "", "Not imported: the spec cannot represent these objects.")
		for _, s := range sk {
			lines = append(lines, "  - "+oneLine(s.String()))
		}
	}
	return strings.Join(lines, "\n")
}

func (m *model) sortedSkipped() []Skipped {
	sk := append([]Skipped(nil), m.skipped...)
	sort.Slice(sk, func(i, j int) bool {
		if sk[i].Object != sk[j].Object {
			return sk[i].Object < sk[j].Object
		}
		return sk[i].Reason < sk[j].Reason
	})
	return sk
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// needsWaitQueueType reports whether the ladder or a recognised queue
// uses vhost-wide wait queues of the non-default type.
func (m *model) needsWaitQueueType() bool {
	if m.l.waitQueueType == spec.TypeQuorum {
		return false
	}
	if m.l.ladder != nil {
		return true
	}
	for _, o := range m.queues {
		if o.cand != nil && len(o.cand.q.Retry.Delays()) > 0 && o.cand.q.Preset == spec.PresetNone && o.cand.q.Layout != spec.LayoutPerAttempt {
			return true
		}
	}
	return false
}

// levelsNode writes the levels key on one line: {resolution: 100ms, max: 1h}.
func levelsNode(ld *ladder) *yaml.Node {
	n := mapping()
	n.Style = yaml.FlowStyle
	add(n, "resolution", duration(ld.levels.Resolution))
	add(n, "max", duration(ld.levels.Max))
	return n
}

func exchangeNode(o *exchangeObj) *yaml.Node {
	e := o.e
	n := mapping()
	add(n, "name", scalar(e.Name))
	add(n, "type", scalar(e.Type))
	if !e.Durable {
		add(n, "durable", scalar(false))
	}
	if e.AutoDelete {
		add(n, "auto_delete", scalar(true))
	}
	if e.Internal {
		add(n, "internal", scalar(true))
	}
	if len(e.Arguments) > 0 {
		add(n, "arguments", scalar(map[string]any(e.Arguments)))
	}
	if len(o.bindings) > 0 {
		add(n, "bindings", bindingsNode(o.bindings))
	}
	return n
}

func queueNode(o *queueObj) *yaml.Node {
	if o.cand == nil {
		return rawQueueNode(o)
	}
	q := o.cand.q
	n := mapping()
	n.HeadComment = o.cand.what
	if o.cand.note != "" {
		n.HeadComment += ":\n" + o.cand.note
	}
	add(n, "name", scalar(q.Name))
	addQueueKeys(n, q, "type", "preset")
	if opts := presetOptionsNode(q.PresetOptions); opts != nil {
		add(n, "preset_options", opts)
	}
	if len(o.bindings) > 0 {
		add(n, "bindings", bindingsNode(o.bindings))
	}
	addQueueKeys(n, q, "immediate_retries")
	if q.Retry.Kind != "" {
		add(n, "retry", retryNode(q.Retry))
	}
	addQueueKeys(n, q, "layout", "dlq", "dlq_name", "retire", "migrate", "parking_lot", "return_queue", "message_ttl", "max_length", "delivery_limit")
	if len(q.Arguments) > 0 {
		add(n, "arguments", scalar(map[string]any(topology.NormalizeArgs(q.Arguments))))
	}
	return n
}

// addQueueKeys writes q's keys, in this order, each with the value the
// spec's field table gives and only where it differs from the default.
func addQueueKeys(n *yaml.Node, q spec.Queue, keys ...string) {
	for _, k := range keys {
		if v, ok := spec.QueueValue(q, k); ok {
			add(n, k, scalar(v))
		}
	}
}

// presetOptionsNode writes the options that differ from the preset's
// defaults, nil for none.
func presetOptionsNode(o spec.PresetOptions) *yaml.Node {
	n := mapping()
	for _, k := range []string{"wait_exchange", "return_exchange", "wait_queue_prefix", "dead_letter_exchange"} {
		if v, ok := spec.PresetOptionValue(o, k); ok {
			add(n, k, scalar(v))
		}
	}
	if len(o.QueueArguments) > 0 {
		add(n, "queue_arguments", scalar(map[string]any(topology.NormalizeArgs(o.QueueArguments))))
	}
	if len(n.Content) == 0 {
		return nil
	}
	return n
}

func rawQueueNode(o *queueObj) *yaml.Node {
	q := o.q
	n := mapping()
	add(n, "name", scalar(q.Name))
	add(n, "raw", scalar(true))
	if t := q.QueueType(); t != spec.TypeClassic {
		add(n, "type", scalar(t))
	}
	if !q.Durable {
		add(n, "durable", scalar(false))
	}
	if q.AutoDelete {
		add(n, "auto_delete", scalar(true))
	}
	args := map[string]any{}
	for k, v := range q.Arguments {
		if k != "x-queue-type" {
			args[k] = v
		}
	}
	if len(args) > 0 {
		add(n, "arguments", scalar(args))
	}
	if len(o.bindings) > 0 {
		add(n, "bindings", bindingsNode(o.bindings))
	}
	return n
}

func bindingsNode(bs []topology.Binding) *yaml.Node {
	bs = append([]topology.Binding(nil), bs...)
	sort.SliceStable(bs, func(i, j int) bool {
		a, b := bs[i], bs[j]
		if a.Source != b.Source {
			return a.Source < b.Source
		}
		if a.RoutingKey != b.RoutingKey {
			return a.RoutingKey < b.RoutingKey
		}
		return a.Arguments.String() < b.Arguments.String()
	})
	seq := sequence()
	for _, b := range bs {
		n := mapping()
		add(n, "exchange", scalar(b.Source))
		if b.RoutingKey != "" {
			add(n, "routing_key", scalar(b.RoutingKey))
		}
		if len(b.Arguments) > 0 {
			add(n, "arguments", scalar(map[string]any(b.Arguments)))
		}
		seq.Content = append(seq.Content, n)
	}
	return seq
}

// retryNode writes a retry policy on one line: {delays: [1s, 5s]}.
func retryNode(p spec.RetryPolicy) *yaml.Node {
	body := mapping()
	body.Style = yaml.FlowStyle
	switch p.Kind {
	case "delays":
		list := sequence()
		list.Style = yaml.FlowStyle
		for _, d := range p.Explicit {
			list.Content = append(list.Content, duration(d))
		}
		n := mapping()
		n.Style = yaml.FlowStyle
		add(n, "delays", list)
		return n
	case "fixed":
		add(body, "delay", duration(p.Delay))
	case "linear":
		add(body, "step", duration(p.Step))
	case "exponential":
		add(body, "initial", duration(p.Initial))
		add(body, "factor", scalar(p.Factor))
		if p.Max > 0 {
			add(body, "max", duration(p.Max))
		}
	}
	add(body, "attempts", scalar(p.Attempts))
	if p.Jitter == spec.JitterFull {
		add(body, "jitter", scalar(spec.JitterFull))
	}
	n := mapping()
	n.Style = yaml.FlowStyle
	add(n, p.Kind, body)
	return n
}

func duration(d time.Duration) *yaml.Node { return scalar(contract.FormatDelay(d)) }

func policyNode(p topology.Policy) *yaml.Node {
	n := mapping()
	add(n, "name", scalar(p.Name))
	add(n, "pattern", scalar(p.Pattern))
	if p.ApplyTo != "queues" {
		add(n, "apply_to", scalar(p.ApplyTo))
	}
	if p.Priority != 0 {
		add(n, "priority", scalar(p.Priority))
	}
	add(n, "definition", scalar(map[string]any(p.Definition)))
	return n
}

func mapping() *yaml.Node  { return &yaml.Node{Kind: yaml.MappingNode} }
func sequence() *yaml.Node { return &yaml.Node{Kind: yaml.SequenceNode} }

// scalar encodes any plain value, quoting strings that would otherwise
// read back as another type ("123", "true", "#").
func scalar(v any) *yaml.Node {
	var n yaml.Node
	if err := n.Encode(v); err != nil {
		panic(fmt.Sprintf("import: encode %T: %v", v, err))
	}
	return &n
}

func add(m *yaml.Node, key string, v *yaml.Node) {
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, v)
}
