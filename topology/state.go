package topology

import (
	"sort"
	"strings"
)

// State is the current content of some vhosts as a source (a live broker,
// a definitions file, or nothing at all) reports it, with the facts that a
// plan's safety checks need beside the topology itself. It is plain data:
// reading it is the source's job, judging it is plan's.
type State struct {
	// Vhosts are the vhosts read, sorted; those that do not exist are
	// absent from Topology.Vhosts.
	Vhosts []string
	// Topology is the current topology, normalised like a desired one.
	Topology Topology
	// Owned holds the objects rmqtopo recorded as its own in these vhosts.
	Owned map[Address]bool
	// Messages holds the message counts read, by queue address; a queue
	// absent here has an unknown count.
	Messages map[Address]int64
	// Consumers holds the consumer counts read with Messages, by queue
	// address; a queue absent here has an unknown count.
	Consumers map[Address]int64
	// BrokerVersion is the broker's RabbitMQ version, when the source
	// knows it (see ParseVersion); "" when it does not.
	BrokerVersion string
}

// NewState returns an empty state of vhosts, ready to be filled.
func NewState(vhosts []string) *State {
	return &State{Vhosts: vhosts, Owned: map[Address]bool{}, Messages: map[Address]int64{}, Consumers: map[Address]int64{}}
}

// Reserved reports whether a name belongs to the broker and never to a
// spec: the default exchange "" and every "amq." name (the built-in
// exchanges and server-named queues). rmqtopo neither declares, nor
// plans around, nor deletes such objects.
func Reserved(name string) bool { return name == "" || strings.HasPrefix(name, "amq.") }

// VhostNames lists every vhost the topology names, on its own or as the
// home of an object, sorted and without repeats.
func (t Topology) VhostNames() []string {
	seen := map[string]bool{}
	var out []string
	add := func(v string) {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	for _, v := range t.Vhosts {
		add(v)
	}
	for _, e := range t.Exchanges {
		add(e.Vhost)
	}
	for _, q := range t.Queues {
		add(q.Vhost)
	}
	for _, b := range t.Bindings {
		add(b.Vhost)
	}
	for _, p := range t.Policies {
		add(p.Vhost)
	}
	sort.Strings(out)
	return out
}
