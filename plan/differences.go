package plan

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"

	"github.com/rmqtopo/rmqtopo/topology"
)

// The canonical forms make reflect.DeepEqual mean "the broker would see the
// same object": arguments normalised, an empty table the same as none.
// Arguments already canonical, as those of an expanded spec or a read
// broker are, are shared rather than copied: nothing in a plan changes
// them.
func canonical(a topology.Args) topology.Args {
	if topology.IsNormal(a) {
		return a
	}
	return topology.NormalizeArgs(a)
}

func canonicalExchange(e topology.Exchange) topology.Exchange {
	e.Arguments = canonical(e.Arguments)
	return e
}

func canonicalQueue(q topology.Queue) topology.Queue {
	q.Arguments = canonical(q.Arguments)
	return q
}

func canonicalBinding(b topology.Binding) topology.Binding {
	b.Arguments = canonical(b.Arguments)
	return b
}

func canonicalPolicy(p topology.Policy) topology.Policy {
	p.Definition = canonical(p.Definition)
	return p
}

func exchangeDifferences(was, want topology.Exchange) []Reason {
	var out []Reason
	if was.Type != want.Type {
		out = append(out, Reason{Kind: ReasonImmutable, Subject: "exchange type", Was: was.Type, Want: want.Type})
	}
	out = append(out, flagDifferences("exchange", []flag{
		{"durable", was.Durable, want.Durable},
		{"auto_delete", was.AutoDelete, want.AutoDelete},
		{"internal", was.Internal, want.Internal},
	})...)
	return append(out, argDifferences(ReasonImmutable, "exchange argument ", was.Arguments, want.Arguments)...)
}

func queueDifferences(was, want topology.Queue) []Reason {
	var out []Reason
	// The type lives in an argument, but "classic" is its absence, so name
	// it the way a reader thinks of it.
	if was.QueueType() != want.QueueType() {
		out = append(out, Reason{Kind: ReasonImmutable, Subject: "queue type", Was: was.QueueType(), Want: want.QueueType()})
	}
	out = append(out, flagDifferences("queue", []flag{
		{"durable", was.Durable, want.Durable},
		{"auto_delete", was.AutoDelete, want.AutoDelete},
	})...)
	wasArgs, wantArgs := withoutQueueType(was.Arguments), withoutQueueType(want.Arguments)
	return append(out, argDifferences(ReasonImmutable, "queue argument ", wasArgs, wantArgs)...)
}

func withoutQueueType(a topology.Args) topology.Args {
	out := topology.Args{}
	for k, v := range a {
		if k != "x-queue-type" {
			out[k] = v
		}
	}
	return out
}

func policyDifferences(was, want topology.Policy) []Reason {
	var out []Reason
	if was.Pattern != want.Pattern {
		out = append(out, Reason{Kind: ReasonChanged, Subject: "policy pattern", Was: strconv.Quote(was.Pattern), Want: strconv.Quote(want.Pattern)})
	}
	if was.ApplyTo != want.ApplyTo {
		out = append(out, Reason{Kind: ReasonChanged, Subject: "policy apply_to", Was: was.ApplyTo, Want: want.ApplyTo})
	}
	if was.Priority != want.Priority {
		out = append(out, Reason{Kind: ReasonChanged, Subject: "policy priority", Was: strconv.FormatInt(was.Priority, 10), Want: strconv.FormatInt(want.Priority, 10)})
	}
	return append(out, argDifferences(ReasonChanged, "policy definition ", was.Definition, want.Definition)...)
}

type flag struct {
	name      string
	was, want bool
}

func flagDifferences(kind string, flags []flag) []Reason {
	var out []Reason
	for _, f := range flags {
		if f.was != f.want {
			out = append(out, Reason{Kind: ReasonImmutable, Subject: kind + " " + f.name, Was: strconv.FormatBool(f.was), Want: strconv.FormatBool(f.want)})
		}
	}
	return out
}

// argDifferences gives a reason of kind for each differing key, in key
// order, its subject the key after subject.
func argDifferences(kind ReasonKind, subject string, was, want topology.Args) []Reason {
	keys := map[string]bool{}
	for k := range was {
		keys[k] = true
	}
	for k := range want {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var out []Reason
	for _, k := range sorted {
		a, inWas := was[k]
		b, inWant := want[k]
		if inWas == inWant && reflect.DeepEqual(a, b) {
			continue
		}
		out = append(out, Reason{Kind: kind, Subject: subject + k, Was: FormatValue(a, inWas), Want: FormatValue(b, inWant)})
	}
	return out
}

// FormatValue renders an argument value the way plans show it: as JSON, or
// "unset" when the argument is absent.
func FormatValue(v any, set bool) string {
	if !set {
		return "unset"
	}
	// What json.Marshal writes for the common scalars, without its cost:
	// a plan shows a value per attribute.
	switch x := v.(type) {
	case string:
		if topology.JSONPlain(x) {
			return `"` + x + `"`
		}
	case int64:
		return strconv.FormatInt(x, 10)
	case bool:
		return strconv.FormatBool(x)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
