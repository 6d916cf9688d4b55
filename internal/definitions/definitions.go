// Package definitions converts between topology.Topology and RabbitMQ's
// definitions JSON, the format of `rabbitmqctl export_definitions`,
// `GET /api/definitions` and `GET /api/definitions/{vhost}`.
//
// Decoding normalises what brokers fill in or report differently (numeric
// argument types, the implicit classic queue type, built-in exchanges) so
// that a topology read back from a broker equals the one that was applied.
package definitions

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/rmqtopo/rmqtopo/topology"
)

// Document is the definitions JSON document.
type Document struct {
	RabbitVersion string     `json:"rabbit_version,omitempty"`
	Vhosts        []Vhost    `json:"vhosts,omitempty"`
	Exchanges     []Exchange `json:"exchanges"`
	Queues        []Queue    `json:"queues"`
	Bindings      []Binding  `json:"bindings"`
	Policies      []Policy   `json:"policies,omitempty"`
}

// Vhost is a vhost entry. Exports of RabbitMQ 3.11 and later give the
// default queue type in the metadata; 3.10 names it at the top.
type Vhost struct {
	Name                string         `json:"name"`
	TopDefaultQueueType string         `json:"default_queue_type,omitempty"`
	Metadata            *VhostMetadata `json:"metadata,omitempty"`
}

// VhostMetadata is the metadata of a vhost entry.
type VhostMetadata struct {
	DefaultQueueType string `json:"default_queue_type,omitempty"`
}

// DefaultQueueType is the vhost's default queue type, "" when the export
// does not say.
func (v Vhost) DefaultQueueType() string {
	if v.Metadata != nil && v.Metadata.DefaultQueueType != "" {
		return v.Metadata.DefaultQueueType
	}
	return v.TopDefaultQueueType
}

// Exchange is an exchange entry.
type Exchange struct {
	Name       string         `json:"name"`
	Vhost      string         `json:"vhost,omitempty"`
	Type       string         `json:"type"`
	Durable    bool           `json:"durable"`
	AutoDelete bool           `json:"auto_delete"`
	Internal   bool           `json:"internal"`
	Arguments  map[string]any `json:"arguments"`
}

// Queue is a queue entry.
type Queue struct {
	Name       string         `json:"name"`
	Vhost      string         `json:"vhost,omitempty"`
	Durable    bool           `json:"durable"`
	AutoDelete bool           `json:"auto_delete"`
	Arguments  map[string]any `json:"arguments"`
}

// Binding is a binding entry.
type Binding struct {
	Source          string         `json:"source"`
	Vhost           string         `json:"vhost,omitempty"`
	Destination     string         `json:"destination"`
	DestinationType string         `json:"destination_type"`
	RoutingKey      string         `json:"routing_key"`
	Arguments       map[string]any `json:"arguments"`
}

// Policy is a policy entry.
type Policy struct {
	Vhost      string         `json:"vhost,omitempty"`
	Name       string         `json:"name"`
	Pattern    string         `json:"pattern"`
	ApplyTo    string         `json:"apply-to"`
	Definition map[string]any `json:"definition"`
	Priority   int64          `json:"priority"`
}

// FromTopology builds the document that declares t, importable with
// `rabbitmqctl import_definitions` or `POST /api/definitions`.
func FromTopology(t topology.Topology) Document {
	d := Document{Exchanges: []Exchange{}, Queues: []Queue{}, Bindings: []Binding{}}
	for _, v := range t.Vhosts {
		d.Vhosts = append(d.Vhosts, Vhost{Name: v})
	}
	for _, e := range t.Exchanges {
		d.Exchanges = append(d.Exchanges, Exchange{Name: e.Name, Vhost: e.Vhost, Type: e.Type, Durable: e.Durable,
			AutoDelete: e.AutoDelete, Internal: e.Internal, Arguments: nonNil(e.Arguments)})
	}
	for _, q := range t.Queues {
		d.Queues = append(d.Queues, Queue{Name: q.Name, Vhost: q.Vhost, Durable: q.Durable, AutoDelete: q.AutoDelete,
			Arguments: nonNil(DeclareArgs(q))})
	}
	for _, b := range t.Bindings {
		d.Bindings = append(d.Bindings, Binding{Source: b.Source, Vhost: b.Vhost, Destination: b.Destination,
			DestinationType: b.DestinationType, RoutingKey: b.RoutingKey, Arguments: nonNil(b.Arguments)})
	}
	for _, p := range t.Policies {
		d.Policies = append(d.Policies, Policy{Vhost: p.Vhost, Name: p.Name, Pattern: p.Pattern, ApplyTo: p.ApplyTo,
			Definition: nonNil(p.Definition), Priority: p.Priority})
	}
	return d
}

func nonNil(a topology.Args) map[string]any {
	if a == nil {
		return map[string]any{}
	}
	return a
}

// Decode reads a definitions document. defaultVhost fills entries without a
// vhost, as in a single-vhost export (`GET /api/definitions/{vhost}`).
func Decode(data []byte, defaultVhost string) (Document, error) {
	var d Document
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&d); err != nil {
		return Document{}, fmt.Errorf("decode definitions: %w", err)
	}
	fill := func(v *string) {
		if *v == "" {
			*v = defaultVhost
		}
	}
	for i := range d.Exchanges {
		fill(&d.Exchanges[i].Vhost)
	}
	for i := range d.Queues {
		fill(&d.Queues[i].Vhost)
	}
	for i := range d.Bindings {
		fill(&d.Bindings[i].Vhost)
	}
	for i := range d.Policies {
		fill(&d.Policies[i].Vhost)
	}
	return d, nil
}

// ToTopology normalises a document into a sorted Topology. If vhosts is
// non-empty, only those vhosts are kept. Objects the broker owns (the
// default exchange, amq.* exchanges and their bindings) are dropped.
func (d Document) ToTopology(vhosts ...string) topology.Topology {
	keep := func(v string) bool { return len(vhosts) == 0 || slices.Contains(vhosts, v) }
	// Sized once for the common case of every object kept.
	t := topology.Topology{Exchanges: make([]topology.Exchange, 0, len(d.Exchanges)),
		Queues: make([]topology.Queue, 0, len(d.Queues)), Bindings: make([]topology.Binding, 0, len(d.Bindings))}
	defaults := map[string]string{}
	for _, v := range d.Vhosts {
		defaults[v.Name] = v.DefaultQueueType()
	}
	seen := map[string]bool{}
	addVhost := func(v string) {
		if keep(v) && !seen[v] {
			seen[v] = true
			t.Vhosts = append(t.Vhosts, v)
		}
	}
	for _, v := range d.Vhosts {
		addVhost(v.Name)
	}
	for _, e := range d.Exchanges {
		if !keep(e.Vhost) || topology.Reserved(e.Name) {
			continue
		}
		addVhost(e.Vhost)
		t.Exchanges = append(t.Exchanges, topology.Exchange{Vhost: e.Vhost, Name: e.Name, Type: e.Type, Durable: e.Durable,
			AutoDelete: e.AutoDelete, Internal: e.Internal, Arguments: topology.NormalizeArgs(e.Arguments)})
	}
	for _, q := range d.Queues {
		if !keep(q.Vhost) {
			continue
		}
		addVhost(q.Vhost)
		t.Queues = append(t.Queues, topology.Queue{Vhost: q.Vhost, Name: q.Name, Durable: q.Durable,
			AutoDelete: q.AutoDelete, Arguments: normalizeQueueArgs(q.Arguments, defaults[q.Vhost])})
	}
	for _, b := range d.Bindings {
		if !keep(b.Vhost) || topology.Reserved(b.Source) {
			continue
		}
		t.Bindings = append(t.Bindings, topology.Binding{Vhost: b.Vhost, Source: b.Source, Destination: b.Destination,
			DestinationType: b.DestinationType, RoutingKey: b.RoutingKey, Arguments: topology.NormalizeArgs(b.Arguments)})
	}
	t.Policies = d.policies(keep)
	// None kept is nil, as it always was.
	if len(t.Exchanges) == 0 {
		t.Exchanges = nil
	}
	if len(t.Queues) == 0 {
		t.Queues = nil
	}
	if len(t.Bindings) == 0 {
		t.Bindings = nil
	}
	t.Sort()
	return t
}

// policies are the document's policies of the vhosts kept, applying to
// "all" when they name nothing.
func (d Document) policies(keep func(vhost string) bool) []topology.Policy {
	var out []topology.Policy
	for _, p := range d.Policies {
		if !keep(p.Vhost) {
			continue
		}
		applyTo := p.ApplyTo
		if applyTo == "" {
			applyTo = "all"
		}
		out = append(out, topology.Policy{Vhost: p.Vhost, Name: p.Name, Pattern: p.Pattern, ApplyTo: applyTo,
			Priority: p.Priority, Definition: topology.NormalizeArgs(p.Definition)})
	}
	return out
}

// normalizeQueueArgs gives a queue that names no type its vhost's default
// type (vhostDefault), which is what the broker made it: a queue declared
// without x-queue-type in a vhost whose default is quorum is a quorum
// queue. It then drops the classic type, which newer brokers report
// explicitly and older ones omit; topology.Queue treats absence as
// classic.
func normalizeQueueArgs(args map[string]any, vhostDefault string) topology.Args {
	a := topology.NormalizeArgs(args)
	// RabbitMQ 3.10 reports "undefined" for a vhost without a default.
	if _, ok := a["x-queue-type"]; !ok && vhostDefault != "" && vhostDefault != "undefined" {
		if a == nil {
			a = topology.Args{}
		}
		a["x-queue-type"] = vhostDefault
	}
	if a["x-queue-type"] == "classic" {
		delete(a, "x-queue-type")
	}
	if len(a) == 0 {
		return nil
	}
	return a
}

// DeclareArgs are the arguments to declare q with: its own, with its type
// always explicit (classic included), so that a vhost whose default queue
// type is quorum cannot turn a classic queue of the spec into a quorum one.
func DeclareArgs(q topology.Queue) topology.Args {
	if _, ok := q.Arguments["x-queue-type"]; ok {
		return q.Arguments
	}
	args := make(topology.Args, len(q.Arguments)+1)
	for k, v := range q.Arguments {
		args[k] = v
	}
	args["x-queue-type"] = "classic"
	return args
}
