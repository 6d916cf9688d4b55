// Package topology is the one data model of a RabbitMQ topology that every
// other part of rmqtopo speaks.
//
// The desired state (expanded from a spec) and the live state (read from a
// broker) are the same type, so that diffing them is a comparison of plain
// values. Values are kept canonical: slices are sorted by Sort, and argument
// values are normalised by NormalizeArgs, so two topologies that mean the same
// thing compare equal with ==-style deep equality.
package topology

import (
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Topology is the declarative content of one or more vhosts.
type Topology struct {
	Vhosts    []string   `json:"vhosts"`
	Exchanges []Exchange `json:"exchanges"`
	Queues    []Queue    `json:"queues"`
	Bindings  []Binding  `json:"bindings"`
	Policies  []Policy   `json:"policies"`
}

// Args holds exchange, queue, binding or policy arguments. Values are one of:
// string, int64, float64, bool, []any or map[string]any (after NormalizeArgs).
type Args map[string]any

// Exchange is a declared exchange. The default exchange ("") and amq.* are
// never part of a Topology: the broker owns them.
type Exchange struct {
	Vhost      string `json:"vhost"`
	Name       string `json:"name"`
	Type       string `json:"type"`
	Durable    bool   `json:"durable"`
	AutoDelete bool   `json:"auto_delete"`
	Internal   bool   `json:"internal"`
	Arguments  Args   `json:"arguments"`
}

// Queue is a declared queue. Its type (classic, quorum, stream) lives in the
// x-queue-type argument; a classic queue carries no x-queue-type at all,
// because brokers disagree on whether they report it.
type Queue struct {
	Vhost      string `json:"vhost"`
	Name       string `json:"name"`
	Durable    bool   `json:"durable"`
	AutoDelete bool   `json:"auto_delete"`
	Arguments  Args   `json:"arguments"`
}

// Destination types of a binding.
const (
	DestQueue    = "queue"
	DestExchange = "exchange"
)

// Binding routes from an exchange to a queue or to another exchange.
type Binding struct {
	Vhost           string `json:"vhost"`
	Source          string `json:"source"`
	Destination     string `json:"destination"`
	DestinationType string `json:"destination_type"`
	RoutingKey      string `json:"routing_key"`
	Arguments       Args   `json:"arguments"`
}

// Policy is a user policy.
type Policy struct {
	Vhost      string `json:"vhost"`
	Name       string `json:"name"`
	Pattern    string `json:"pattern"`
	ApplyTo    string `json:"apply_to"`
	Priority   int64  `json:"priority"`
	Definition Args   `json:"definition"`
}

// Kind names the kind of a topology object.
type Kind string

const (
	KindVhost    Kind = "vhost"
	KindExchange Kind = "exchange"
	KindQueue    Kind = "queue"
	KindBinding  Kind = "binding"
	KindPolicy   Kind = "policy"
)

// Address identifies one object. Two objects with the same Address are the
// same object in two states; anything else about them is content.
type Address struct {
	Kind  Kind   `json:"kind"`
	Vhost string `json:"vhost"`
	// Name is the object's name; for a binding it is "source -> destination".
	Name string `json:"name"`
	// Key distinguishes bindings between the same pair of endpoints: the
	// destination type, routing key and arguments.
	Key string `json:"key,omitempty"`
}

// String renders an address the way plans and errors show it.
func (a Address) String() string {
	// Concatenated, not formatted: every line of a large plan names one.
	// strconv.Quote is what %q does to a string.
	s := string(a.Kind) + " " + strconv.Quote(a.Name)
	if a.Kind == KindVhost {
		return s
	}
	if a.Key != "" {
		return s + " " + a.Key + " in vhost " + strconv.Quote(a.Vhost)
	}
	return s + " in vhost " + strconv.Quote(a.Vhost)
}

// Addr returns the exchange's address.
func (e Exchange) Addr() Address { return Address{Kind: KindExchange, Vhost: e.Vhost, Name: e.Name} }

// Addr returns the queue's address.
func (q Queue) Addr() Address { return Address{Kind: KindQueue, Vhost: q.Vhost, Name: q.Name} }

// Addr returns the policy's address.
func (p Policy) Addr() Address { return Address{Kind: KindPolicy, Vhost: p.Vhost, Name: p.Name} }

// Addr returns the binding's address. Bindings have no mutable content: any
// difference is a different binding, so the whole binding is its identity.
func (b Binding) Addr() Address {
	// Built without fmt: a plan of a million objects computes this for
	// every binding. strconv.Quote is what %q does to a string.
	key := "[" + b.DestinationType + " key=" + strconv.Quote(b.RoutingKey)
	if len(b.Arguments) > 0 {
		key += " args=" + b.Arguments.String()
	}
	key += "]"
	return Address{Kind: KindBinding, Vhost: b.Vhost, Name: b.Source + " -> " + b.Destination, Key: key}
}

// QueueType returns the queue's type: "classic" when no x-queue-type is set.
func (q Queue) QueueType() string {
	if t, ok := q.Arguments["x-queue-type"].(string); ok && t != "" {
		return t
	}
	return "classic"
}

// String renders arguments deterministically (sorted keys, JSON values).
func (a Args) String() string {
	if len(a) == 0 {
		return "{}"
	}
	keys := make([]string, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k)
		b.WriteString(": ")
		writeJSONValue(&b, a[k])
	}
	b.WriteByte('}')
	return b.String()
}

// writeJSONValue writes v as json.Marshal would, without its cost for the
// common scalars: integers, booleans and strings that need no escaping.
func writeJSONValue(b *strings.Builder, v any) {
	switch v := v.(type) {
	case int64:
		b.WriteString(strconv.FormatInt(v, 10))
		return
	case bool:
		b.WriteString(strconv.FormatBool(v))
		return
	case string:
		if jsonPlain(v) {
			b.WriteByte('"')
			b.WriteString(v)
			b.WriteByte('"')
			return
		}
	}
	out, _ := json.Marshal(v)
	b.Write(out)
}

// jsonPlain reports whether json.Marshal writes s unchanged between
// quotes: printable ASCII without the characters it escapes.
func jsonPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// NormalizeArgs returns a canonical copy of args: integers of every width
// become int64, whole float64 values (as JSON decoding produces) become int64,
// nested tables and arrays are normalised too, and an empty table becomes nil.
func NormalizeArgs(args map[string]any) Args {
	if len(args) == 0 {
		return nil
	}
	out := make(Args, len(args))
	for k, v := range args {
		out[k] = normalizeValue(v)
	}
	return out
}

// IsNormal reports whether args is already what NormalizeArgs would make
// of it (nil when empty, only int64 for whole numbers, strings, booleans),
// so that a caller which does not change args may skip the copy. Nested
// tables and lists are not looked into: they answer false.
func IsNormal(args Args) bool {
	if args != nil && len(args) == 0 {
		return false
	}
	for _, v := range args {
		switch x := v.(type) {
		case string, int64, bool:
		case float64:
			if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func normalizeValue(v any) any {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int8:
		return int64(x)
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case uint8:
		return int64(x)
	case uint16:
		return int64(x)
	case uint32:
		return int64(x)
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x)
		}
		return float64(x)
	case float32:
		return normalizeValue(float64(x))
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x)
		}
		return x
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		return map[string]any(NormalizeArgs(x))
	case Args:
		return map[string]any(NormalizeArgs(x))
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalizeValue(e)
		}
		return out
	case []string:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = e
		}
		return out
	default:
		return v
	}
}

// Sort puts every slice in canonical order so that equal topologies compare
// equal and renderings are deterministic.
func (t *Topology) Sort() {
	sort.Strings(t.Vhosts)
	sort.Slice(t.Exchanges, func(i, j int) bool {
		a, b := t.Exchanges[i], t.Exchanges[j]
		if a.Vhost != b.Vhost {
			return a.Vhost < b.Vhost
		}
		return a.Name < b.Name
	})
	sort.Slice(t.Queues, func(i, j int) bool {
		a, b := t.Queues[i], t.Queues[j]
		if a.Vhost != b.Vhost {
			return a.Vhost < b.Vhost
		}
		return a.Name < b.Name
	})
	sortBindings(t.Bindings)
	sort.Slice(t.Policies, func(i, j int) bool {
		a, b := t.Policies[i], t.Policies[j]
		if a.Vhost != b.Vhost {
			return a.Vhost < b.Vhost
		}
		return a.Name < b.Name
	})
}

// sortBindings sorts by address, computing each address once: building
// one renders the binding's arguments, too costly to repeat in every
// comparison of a large topology.
func sortBindings(bs []Binding) {
	if sort.SliceIsSorted(bs, func(i, j int) bool { return bindingLess(bs[i], bs[j]) }) {
		return
	}
	type keyed struct {
		a Address
		b Binding
	}
	ks := make([]keyed, len(bs))
	for i, b := range bs {
		ks[i] = keyed{b.Addr(), b}
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].a.less(ks[j].a) })
	for i := range ks {
		bs[i] = ks[i].b
	}
}

func bindingLess(x, y Binding) bool {
	if x.Vhost != y.Vhost || x.Source != y.Source || x.Destination != y.Destination {
		return Address{Kind: KindBinding, Vhost: x.Vhost, Name: x.Source + " -> " + x.Destination}.less(
			Address{Kind: KindBinding, Vhost: y.Vhost, Name: y.Source + " -> " + y.Destination})
	}
	return x.Addr().less(y.Addr())
}

func (a Address) less(b Address) bool {
	if a.Vhost != b.Vhost {
		return a.Vhost < b.Vhost
	}
	if a.Name != b.Name {
		return a.Name < b.Name
	}
	if a.Key != b.Key {
		return a.Key < b.Key
	}
	return a.Kind < b.Kind
}

// Less orders addresses by vhost, then name, then key, then kind: a total
// order, so that sorting any mix of addresses is deterministic. Callers
// that group by kind first (as plans do, by phase) compare Kind themselves.
func (a Address) Less(b Address) bool { return a.less(b) }

// Queue returns the queue with the given vhost and name.
func (t *Topology) Queue(vhost, name string) (Queue, bool) {
	for _, q := range t.Queues {
		if q.Vhost == vhost && q.Name == name {
			return q, true
		}
	}
	return Queue{}, false
}

// Exchange returns the exchange with the given vhost and name.
func (t *Topology) Exchange(vhost, name string) (Exchange, bool) {
	for _, e := range t.Exchanges {
		if e.Vhost == vhost && e.Name == name {
			return e, true
		}
	}
	return Exchange{}, false
}
