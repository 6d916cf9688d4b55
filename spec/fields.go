package spec

import (
	"maps"
	"reflect"
	"slices"
	"time"

	"go.yaml.in/yaml/v3"
)

// The spec's fields, described once.
//
// Every key a spec file may hold is one field entry in the tables of
// fields_*.go: its key, its JSON Schema type, bounds, enum and default,
// its title and description (what an editor shows), its row in the key
// tables of docs/spec.md, where it applies (Raw: also on a raw queue),
// how the decoder reads it and, for a queue's scalar keys, the value
// `rmqtopo import` writes. The decoder dispatches keys through the
// tables and lists the expected keys from them; bounds and enums come
// from the entry. schemas/rmqtopo.schema.json and the key tables of
// docs/spec.md are generated from the same tables (see JSONSchema,
// KeyTables and internal/specgen); a test fails when the checked-in files
// differ from what is generated.

// fieldDoc describes one key of a spec object: everything but how it is
// decoded. The names follow JSON Schema.
type fieldDoc struct {
	Key   string
	Title string
	// Description is plain text: the schema's description, which editors
	// show on hover.
	Description string
	// Type is the JSON Schema type, "" when Ref or Schema gives it.
	Type string
	// Ref names the $defs entry the value is, "" for none.
	Ref string
	// Default is the value when the key is absent, as the schema states
	// it; nil for none.
	Default any
	// Min and Max bound a number; nil for unbounded.
	Min, Max  *int64
	MinLength int
	Pattern   string
	Enum      []string
	Required  bool
	// Raw: the key applies to a raw queue too (queues only).
	Raw bool
	// Examples is a JSON array of example values.
	Examples string
	// Schema holds further JSON Schema members, as JSON object members
	// without the braces (anyOf, items, …).
	Schema string
	// Inline is the object the value is, written inside this key's schema
	// rather than under $defs.
	Inline schemaObject
	// Row is the key's row in the key tables of docs/spec.md.
	Row row
}

// row is a key's row in a docs key table: Markdown.
type row struct{ Type, Default, Meaning string }

// bound is a pointer to n, for fieldDoc.Min and Max.
func bound(n int64) *int64 { return &n }

// objectDoc describes a spec object (a mapping of fields).
type objectDoc struct {
	// Name is the object's $defs name.
	Name        string
	Title       string
	Description string
	// Open: keys beyond the fields are not refused by the schema.
	Open bool
	// Schema holds further JSON Schema members of the object.
	Schema string
	// AllOf holds the rules that span keys: JSON Schema clauses,
	// comma-separated.
	AllOf string
	// RawRule adds the rule of a raw queue to AllOf: on one, the schema
	// refuses every key without Raw, as the decoder does.
	RawRule bool
}

// field is one key of an object decoded into a T.
type field[T any] struct {
	fieldDoc
	// decode reads the key's value v, at path p, into t.
	decode func(d *decoder, f *fieldDoc, t *T, v *yaml.Node, p string)
	// value is what a spec file writes for the key, for the importer;
	// nil for a key written by hand.
	value func(t *T) any
}

// object is a spec object decoded into a T: its fields in the order the
// docs list them, and an index by key.
type object[T any] struct {
	objectDoc
	fields []field[T]
	// keys are the fields' keys, sorted, for the message about an unknown
	// key.
	keys  []string
	index map[string]int
}

func newObject[T any](doc objectDoc, fields ...field[T]) *object[T] {
	o := &object[T]{objectDoc: doc, fields: fields, index: map[string]int{}}
	for i, f := range fields {
		o.index[f.Key] = i
	}
	o.keys = slices.Sorted(maps.Keys(o.index))
	return o
}

// schemaObject is an object as the generators see it.
type schemaObject interface {
	doc() *objectDoc
	docs() []*fieldDoc
}

func (o *object[T]) doc() *objectDoc { return &o.objectDoc }

func (o *object[T]) docs() []*fieldDoc {
	out := make([]*fieldDoc, len(o.fields))
	for i := range o.fields {
		out[i] = &o.fields[i].fieldDoc
	}
	return out
}

// field returns the field of key, nil for none.
func (o *object[T]) field(key string) *field[T] {
	i, ok := o.index[key]
	if !ok {
		return nil
	}
	return &o.fields[i]
}

// required lists the keys that must be present, in field order.
func (o *object[T]) required() []string {
	var keys []string
	for _, f := range o.fields {
		if f.Required {
			keys = append(keys, f.Key)
		}
	}
	return keys
}

// decode walks the mapping n strictly into t: every key must be one of
// o's and unique. seen, when not nil, is told of each key decoded. It
// reports whether n was a mapping.
func (o *object[T]) decode(d *decoder, n *yaml.Node, path string, t *T, seen func(key string, v *yaml.Node, p string)) bool {
	return d.fieldsOf(n, path, func() []string { return o.keys }, func(k string, v *yaml.Node, p string) bool {
		f := o.field(k)
		if f == nil {
			return false
		}
		f.decode(d, &f.fieldDoc, t, v, p)
		if seen != nil {
			seen(k, v, p)
		}
		return true
	})
}

// written is the value a spec file writes for t's key: ok is false when
// the key has no writer or t holds what a decoded T starts with (zero),
// which a file need not write.
func (o *object[T]) written(t, zero *T, key string) (any, bool) {
	f := o.field(key)
	if f == nil || f.value == nil {
		return nil, false
	}
	v := f.value(t)
	return v, !sameValue(v, f.value(zero))
}

// sameValue reports whether a and b are equal, an empty list or mapping
// equal to none.
func sameValue(a, b any) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if isEmpty(va) && isEmpty(vb) {
		return true
	}
	return reflect.DeepEqual(a, b)
}

func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Slice, reflect.Map:
		return v.Len() == 0
	}
	return false
}

// Decoders of the common kinds, for field entries: each reads the value
// into the place get gives, within the entry's bounds.

func boolField[T any](get func(*T) *bool) func(*decoder, *fieldDoc, *T, *yaml.Node, string) {
	return func(d *decoder, _ *fieldDoc, t *T, v *yaml.Node, p string) { d.boolean(v, p, get(t)) }
}

func strField[T any](get func(*T) *string) func(*decoder, *fieldDoc, *T, *yaml.Node, string) {
	return func(d *decoder, _ *fieldDoc, t *T, v *yaml.Node, p string) { d.str(v, p, get(t)) }
}

// nameField reads a name: an explicit "" is refused.
func nameField[T any](get func(*T) *string) func(*decoder, *fieldDoc, *T, *yaml.Node, string) {
	return func(d *decoder, _ *fieldDoc, t *T, v *yaml.Node, p string) { d.name(v, p, get(t)) }
}

func intField[T any](get func(*T) *int) func(*decoder, *fieldDoc, *T, *yaml.Node, string) {
	return func(d *decoder, f *fieldDoc, t *T, v *yaml.Node, p string) { d.intField(v, p, *f.Min, *f.Max, get(t)) }
}

func int64Field[T any](get func(*T) *int64) func(*decoder, *fieldDoc, *T, *yaml.Node, string) {
	return func(d *decoder, f *fieldDoc, t *T, v *yaml.Node, p string) { d.integer(v, p, *f.Min, *f.Max, get(t)) }
}

func argsField[T any](get func(*T) *map[string]any) func(*decoder, *fieldDoc, *T, *yaml.Node, string) {
	return func(d *decoder, _ *fieldDoc, t *T, v *yaml.Node, p string) { d.args(v, p, get(t)) }
}

func bindingsField[T any](get func(*T) *[]Binding) func(*decoder, *fieldDoc, *T, *yaml.Node, string) {
	return func(d *decoder, _ *fieldDoc, t *T, v *yaml.Node, p string) {
		d.list(v, p, func(_ int, b *yaml.Node, bp string) { *get(t) = append(*get(t), d.binding(b, bp)) })
	}
}

func durationField[T any](get func(*T) *time.Duration) func(*decoder, *fieldDoc, *T, *yaml.Node, string) {
	return func(d *decoder, _ *fieldDoc, t *T, v *yaml.Node, p string) { d.duration(v, p, get(t)) }
}
