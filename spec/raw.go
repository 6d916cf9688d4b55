package spec

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/rmqtopo/rmqtopo/internal/english"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Raw queues and queue arguments.
//
// A raw queue (raw: true) is declared exactly as written: its type,
// durable, auto_delete, arguments and bindings, and nothing generated
// beside it. It is how `rmqtopo import` writes the queues it does not
// recognise as part of a retry topology, and how a spec keeps a queue that
// rmqtopo should manage but not retry.
//
// Arguments are checked strictly, because a typo in an x- argument is
// silently ignored by RabbitMQ and a wrong value type is refused only at
// declare time, after earlier writes of an apply.

// addDeclaredQueue adds a queue written under queues: a raw one as
// written, any other as its work queue. It reports whether the name was
// accepted.
func (b *builder) addDeclaredQueue(q Queue, o origin) bool {
	if q.Raw {
		b.checkRawKeys(q)
	} else {
		b.checkManagedKeys(q)
	}
	args := b.declaredArgs(q)
	if !b.addQueue(topology.Queue{Name: q.Name, Arguments: args}, o) {
		return false
	}
	if q.Raw {
		dq, _ := b.queue(q.Name)
		dq.Durable, dq.AutoDelete = q.Durable, q.AutoDelete
	}
	return true
}

// declaredArgs are the arguments of a declared queue, checked.
func (b *builder) declaredArgs(q Queue) map[string]any {
	typ := q.Type
	if !q.Raw && typ == TypeStream {
		typ = TypeClassic
	}
	var own map[string]any
	var reserved map[string]bool
	if q.Raw {
		own = map[string]any{}
		if typ != TypeClassic && typ != "" {
			own["x-queue-type"] = typ
		}
	} else {
		own = b.workQueueArgs(q)
		if len(q.Arguments) > 0 { // only arguments written can be refused
			reserved = managedArgs(q)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(q.Arguments)) {
		at, ok := q.argAt[k]
		if !ok {
			at = pos{line: q.argumentsAt.line, col: q.argumentsAt.col, path: join(q.argumentsAt.path, k)}
		}
		if !b.checkArgument(k, q.Arguments[k], typ, at) {
			continue
		}
		if _, ok := own[k]; (ok || reserved[k]) && !q.Raw {
			b.errorf(at, "argument %q is set by rmqtopo for this queue (%s); leave it out", k, ownedArgHint(k))
			continue
		}
		own[k] = q.Arguments[k]
	}
	b.checkNeeds(q, own)
	return own
}

// checkNeeds refuses a written argument without the arguments the broker
// refuses it without (the key table's Needs).
func (b *builder) checkNeeds(q Queue, args map[string]any) {
	for _, k := range slices.Sorted(maps.Keys(q.Arguments)) {
		f, ok := topology.LookupFeature(topology.FeatureQueueArgument, k, args[k])
		if !ok {
			continue
		}
		for _, n := range f.Needs {
			if _, set := args[n.Key]; set {
				continue
			}
			at, ok := q.argAt[k]
			if !ok {
				at = q.argumentsAt
			}
			b.errorf(at, "argument %q needs %q beside it: RabbitMQ refuses it alone", k, n.Key)
		}
	}
}

// managedArgs are the arguments whose attribute rmqtopo's policy of q
// sets: an argument would beat the policy (or, for a limit, cap it), so
// the spec's own key must be used instead.
func managedArgs(q Queue) map[string]bool {
	key := ""
	def := workQueuePolicy(q, func(def map[string]any) { deadLetterPolicy(def, q.Type, "", &key) })
	out := map[string]bool{"x-queue-type": true}
	for k := range def {
		out["x-"+k] = true
	}
	return out
}

func ownedArgHint(k string) string {
	switch k {
	case "x-queue-type":
		return "use type"
	case "x-delivery-limit":
		return "use delivery_limit"
	case "x-message-ttl":
		return "use message_ttl"
	case "x-max-length":
		return "use max_length"
	}
	return "it is part of the queue's dead-lettering; use raw: true to write it yourself"
}

// checkArgument checks one queue argument's name and value for a queue of
// type typ.
func (b *builder) checkArgument(name string, value any, typ string, at pos) bool {
	if name == "x-queue-type" {
		b.errorf(at, "the queue type is set with the key type, not the argument x-queue-type")
		return false
	}
	f, known := topology.LookupFeature(topology.FeatureQueueArgument, name, nil)
	if !known {
		if strings.HasPrefix(name, "x-") {
			hint := "RabbitMQ would ignore it; see docs/spec.md for the known ones"
			if near := nearest(name); near != "" {
				hint = fmt.Sprintf("did you mean %q?", near)
			}
			b.errorf(at, "unknown queue argument %q (%s)", name, hint)
			return false
		}
		return true
	}
	if typ == "" {
		typ = TypeClassic
	}
	if !f.AcceptsType(typ) {
		b.errorf(at, "argument %q needs a %s queue; a %s queue refuses it", name, strings.Join(f.Types, " or "), typ)
		return false
	}
	return b.checkValue(name, value, f.Values, at)
}

// checkValue checks a queue argument's value against the key table's rule.
func (b *builder) checkValue(name string, value any, rule topology.Values, at pos) bool {
	v := topology.NormalizeArgs(map[string]any{name: value})[name]
	switch rule.Kind {
	case topology.IntValue:
		n, ok := v.(int64)
		if !ok || n < rule.Min || n > rule.Max {
			b.errorf(at, "argument %q must be a whole number from %d to %d, got %s", name, rule.Min, rule.Max, describeValue(value))
			return false
		}
	case topology.BoolValue:
		if _, ok := v.(bool); !ok {
			b.errorf(at, "argument %q must be true or false, got %s", name, describeValue(value))
			return false
		}
	case topology.StringValue:
		s, ok := v.(string)
		if !ok {
			b.errorf(at, "argument %q must be a string, got %s", name, describeValue(value))
			return false
		}
		if len(rule.Enum) > 0 && !slices.Contains(rule.Enum, s) {
			b.errorf(at, "argument %q must be one of %s, got %q", name, strings.Join(rule.Enum, ", "), s)
			return false
		}
		if rule.Pattern != "" && !regexp.MustCompile(rule.Pattern).MatchString(s) {
			b.errorf(at, "argument %q must be a whole number and a unit Y, M, D, h, m or s (e.g. \"7D\"), got %q", name, s)
			return false
		}
	}
	return true
}

func describeValue(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("string %q", x)
	case nil:
		return "null"
	case bool:
		return fmt.Sprintf("boolean %t", x)
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	}
	return fmt.Sprintf("%v", v)
}

// checkRawKeys refuses, on a raw queue, every key that builds retry
// topology: a raw queue has none.
func (b *builder) checkRawKeys(q Queue) {
	for _, k := range q.set.sorted() {
		if f := queueObject.field(k); f != nil && !f.Raw {
			at, _ := q.set.get(k)
			b.errorf(at, "%s does not apply to a raw queue: a raw queue is declared exactly as written, with no retry topology", k)
		}
	}
}

// checkManagedKeys refuses, on a queue with retry topology, the keys that
// only a raw queue takes.
func (b *builder) checkManagedKeys(q Queue) {
	if at, ok := q.set.get(keyDurable); ok && !q.Durable {
		b.errorf(at, "only a raw queue (raw: true) may be transient: a queue with retry topology is durable")
	}
	if at, ok := q.set.get(keyAutoDelete); ok && q.AutoDelete {
		b.errorf(at, "only a raw queue (raw: true) may be auto-deleted: a queue with retry topology must outlive its consumers")
	}
	if q.Type == TypeStream {
		at, _ := q.set.get(keyType)
		b.errorf(at, "a stream cannot have retry topology (it does not dead-letter); use raw: true")
	}
}

// keyPositions records where each key of a mapping is written.
func keyPositions(n *yaml.Node, path string) map[string]pos {
	out := map[string]pos{}
	if n.Kind != yaml.MappingNode {
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		out[k.Value] = at(k, join(path, k.Value))
	}
	return out
}

// nearest is the known argument within two edits of name, if any.
func nearest(name string) string {
	return english.Nearest(name, topology.QueueArgumentNames(), 2)
}
