package topology

import (
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
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
	// Owned holds the objects rmqtopo recorded as its own in these vhosts:
	// after Read, those of every record; once a plan knows which spec it
	// is for (plan.Make), those that spec may delete (see OwnershipFor).
	Owned map[Address]bool
	// Records are the ownership records found in these vhosts, one per
	// spec and vhost (the newest generation of each).
	Records []Record
	// NoRecords lists the vhosts whose ownership records the source cannot
	// show (a definitions export taken without them): whether an object
	// there is rmqtopo's is unknown, so a plan says what it may delete.
	NoRecords map[string]bool
	// BrokerVersion is the RabbitMQ version of the source (see
	// ParseVersion), "" when unknown (a file without rabbit_version).
	BrokerVersion string
	// Deprecated and Plugins are what the live broker says of its
	// deprecated features and enabled plugins (see Facts); nil when the
	// source cannot say (a definitions export, an older release, a user
	// who may not read them).
	Deprecated map[string]string
	Plugins    map[string]bool
	// DefaultQueueType is each vhost's default queue type as the source
	// reports it; absent means classic.
	DefaultQueueType map[string]string
	// Messages holds the message counts read, by queue address; a queue
	// absent here has an unknown count.
	Messages map[Address]int64
	// Consumers holds the consumer counts read with Messages, by queue
	// address; a queue absent here has an unknown count.
	Consumers map[Address]int64
	// Vanished holds the queues a count found gone although the read
	// listed them: the broker changed in between (a killed apply's last
	// delete still landing, another client), so the read is stale there
	// and their counts are unknown. nil until a count finds one.
	Vanished map[Address]bool
	// OperatorPolicies are the operator policies of these vhosts, which cap
	// numeric limits; none when the source has none or may not read them.
	OperatorPolicies []Policy
}

// Facts are the state's facts for the key table's verdicts, judged by
// version v: the source's own facts when v is the source's version, else
// only v (a --rabbitmq-version other than the broker's).
func (st *State) Facts(v Version) Facts {
	x := Facts{Version: v}
	if st == nil {
		return x
	}
	if own, err := ParseVersion(st.BrokerVersion); err == nil && own == v {
		x.Deprecated, x.Plugins = st.Deprecated, st.Plugins
	}
	return x
}

// NewState returns an empty state of vhosts, ready to be filled.
func NewState(vhosts []string) *State {
	return &State{Vhosts: vhosts, Owned: map[Address]bool{}, Messages: map[Address]int64{}, Consumers: map[Address]int64{},
		NoRecords: map[string]bool{}, DefaultQueueType: map[string]string{}}
}

// Reserved reports whether a name belongs to the broker and never to a
// spec: the default exchange "" and every "amq." name (the built-in
// exchanges and server-named queues). rmqtopo neither declares, nor
// plans around, nor deletes such objects.
func Reserved(name string) bool { return name == "" || strings.HasPrefix(name, "amq.") }

// BuiltinExchanges are the amq.* exchanges every vhost has; a binding may
// use them as a source although no spec declares them.
var BuiltinExchanges = map[string]bool{
	"amq.direct": true, "amq.fanout": true, "amq.topic": true, "amq.headers": true,
	"amq.match": true, "amq.rabbitmq.trace": true,
}

// MaxNameBytes is RabbitMQ's limit on vhost, exchange, queue and routing
// key names (AMQP short strings).
const MaxNameBytes = 255

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

// maxQuote bounds how much of a name or value a message quotes: a 20 MB
// name must not be echoed back.
const maxQuote = 100

// Quote quotes s for a message, at most about 100 bytes of it, cut on a
// UTF-8 boundary and marked with "…" when cut.
func Quote(s string) string {
	if len(s) <= maxQuote {
		return strconv.Quote(s)
	}
	cut := maxQuote
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "…"
}

// Access is what a user may do on a broker, as far as the broker lets the
// user see it: its tags, and its permissions in some vhosts.
type Access struct {
	User string
	Tags []string
	// Permissions holds the user's permission regexes by vhost; a vhost
	// absent here has none. Nil when the user may not read permissions
	// (only administrators may), and so they are unknown.
	Permissions map[string]Permission
}

// Permission is a user's configure, write and read regexes in one vhost.
type Permission struct {
	Configure, Write, Read string
}
