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
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/rmqtopo/rmqtopo/contract"
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

// Kind is the kind of a topology object. It is a byte, not its name, so
// that an Address stays small; text and JSON show the name, and kinds
// sort as their names do.
type Kind uint8

const (
	kindUnset Kind = iota
	KindBinding
	KindExchange
	KindPolicy
	KindQueue
	KindVhost
)

var kindNames = [...]string{kindUnset: "", KindBinding: "binding", KindExchange: "exchange",
	KindPolicy: "policy", KindQueue: "queue", KindVhost: "vhost"}

// String returns the kind's name, e.g. "queue".
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// ParseKind returns the kind named s.
func ParseKind(s string) (Kind, bool) {
	for i, n := range kindNames {
		if i != int(kindUnset) && n == s {
			return Kind(i), true
		}
	}
	return kindUnset, false
}

// MarshalText writes the kind's name.
func (k Kind) MarshalText() ([]byte, error) {
	if k == kindUnset || int(k) >= len(kindNames) {
		return nil, fmt.Errorf("topology: no name for kind %d", k)
	}
	return []byte(kindNames[k]), nil
}

// UnmarshalText reads a kind's name.
func (k *Kind) UnmarshalText(b []byte) error {
	kind, ok := ParseKind(string(b))
	if !ok {
		return fmt.Errorf("unknown kind %q", b)
	}
	*k = kind
	return nil
}

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
func (a Address) String() string { return string(a.Append(nil)) }

// Append appends String's text to b, building no string: renderers write
// every address of a plan so.
func (a Address) Append(b []byte) []byte {
	// strconv.Quote is what %q does to a string.
	b = append(b, a.Kind.String()...)
	b = append(b, ' ')
	b = strconv.AppendQuote(b, a.Name)
	if a.Kind == KindVhost {
		return b
	}
	if a.Key != "" {
		b = append(b, ' ')
		b = append(b, a.Key...)
	}
	b = append(b, " in vhost "...)
	return strconv.AppendQuote(b, a.Vhost)
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
	// Built in a buffer on the stack and allocated once, at its size,
	// without fmt: every binding of a plan computes it and keeps it.
	// strconv.Quote is what %q does to a string.
	var buf [128]byte
	key := append(buf[:0], '[')
	key = append(key, b.DestinationType...)
	key = append(key, " key="...)
	key = strconv.AppendQuote(key, b.RoutingKey)
	if len(b.Arguments) > 0 {
		key = append(key, " args="...)
		key = b.Arguments.append(key)
	}
	key = append(key, ']')
	return Address{Kind: KindBinding, Vhost: b.Vhost, Name: b.Source + " -> " + b.Destination, Key: string(key)}
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
	return string(a.append(nil))
}

// append appends String's text to b.
func (a Args) append(b []byte) []byte {
	var small [8]string // most tables are small: no allocation for their keys
	keys := small[:0]
	for k := range a {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, k...)
		b = append(b, ": "...)
		b = appendJSONValue(b, a[k])
	}
	return append(b, '}')
}

// appendJSONValue appends v as json.Marshal writes it, without its cost
// for the common scalars: integers, booleans and strings that need no
// escaping.
func appendJSONValue(b []byte, v any) []byte {
	switch v := v.(type) {
	case int64:
		return strconv.AppendInt(b, v, 10)
	case bool:
		return strconv.AppendBool(b, v)
	case string:
		if JSONPlain(v) {
			b = append(b, '"')
			b = append(b, v...)
			return append(b, '"')
		}
	}
	out, _ := json.Marshal(v)
	return append(b, out...)
}

// JSONPlain reports whether json.Marshal writes s unchanged between
// quotes: printable ASCII without the characters it escapes. Renderers
// use it to skip json.Marshal for most values.
func JSONPlain(s string) bool {
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
			if _, whole := contract.JSONInteger(x); whole {
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
	case string, bool:
		return v
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
	}
	if n, ok := contract.JSONInteger(v); ok {
		return n
	}
	// What is a number but not an integer stays a float64.
	switch x := v.(type) {
	case uint64:
		return float64(x)
	case float32:
		return float64(x)
	case json.Number:
		f, _ := x.Float64()
		return f
	}
	return v
}

// Sort puts every slice in canonical order so that equal topologies compare
// equal and renderings are deterministic.
func (t *Topology) Sort() {
	sort.Strings(t.Vhosts)
	slices.SortFunc(t.Exchanges, func(a, b Exchange) int { return compareNamed(a.Vhost, a.Name, b.Vhost, b.Name) })
	slices.SortFunc(t.Queues, func(a, b Queue) int { return compareNamed(a.Vhost, a.Name, b.Vhost, b.Name) })
	slices.SortFunc(t.Bindings, CompareBindings)
	slices.SortFunc(t.Policies, func(a, b Policy) int { return compareNamed(a.Vhost, a.Name, b.Vhost, b.Name) })
}

func compareNamed(vhostA, nameA, vhostB, nameB string) int {
	if c := strings.Compare(vhostA, vhostB); c != 0 {
		return c
	}
	return strings.Compare(nameA, nameB)
}

// CompareBindings orders bindings by address (Address.Compare) without
// building the addresses, too costly in every comparison of a large
// topology: the name "source -> destination" is compared piece by piece,
// and only bindings between the same endpoints, which are few, render
// their keys.
func CompareBindings(x, y Binding) int {
	if c := strings.Compare(x.Vhost, y.Vhost); c != 0 {
		return c
	}
	if c := compareJoined([3]string{x.Source, " -> ", x.Destination}, [3]string{y.Source, " -> ", y.Destination}); c != 0 {
		return c
	}
	return strings.Compare(x.Addr().Key, y.Addr().Key)
}

// compareJoined compares the concatenations of a's and b's pieces without
// concatenating them.
func compareJoined(a, b [3]string) int {
	i, j := 0, 0
	x, y := a[0], b[0]
	for {
		for x == "" && i < len(a)-1 {
			i++
			x = a[i]
		}
		for y == "" && j < len(b)-1 {
			j++
			y = b[j]
		}
		if x == "" || y == "" {
			return cmp.Compare(len(x), len(y))
		}
		n := min(len(x), len(y))
		if c := strings.Compare(x[:n], y[:n]); c != 0 {
			return c
		}
		x, y = x[n:], y[n:]
	}
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

// Compare is Less as a three-way comparison, for slices.SortFunc and
// binary search: -1, 0 or +1.
func (a Address) Compare(b Address) int {
	if c := strings.Compare(a.Vhost, b.Vhost); c != 0 {
		return c
	}
	if c := strings.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	if c := strings.Compare(a.Key, b.Key); c != 0 {
		return c
	}
	return cmp.Compare(a.Kind, b.Kind)
}

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
