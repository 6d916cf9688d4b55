package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
)

//go:generate go run ./internal/specgen -root ..

// JSONSchema is the spec's JSON Schema (draft 2020-12), generated from the
// field tables: schemas/rmqtopo.schema.json is this, checked in for
// editors (`go generate ./spec` writes it).
func JSONSchema() []byte {
	var b bytes.Buffer
	b.WriteString("{")
	members(&b, specObject.Schema)
	b.WriteString(",")
	objectBody(&b, specObject, true)
	b.WriteString(`,"$defs":{`)
	defs := []struct {
		name string
		body func(*bytes.Buffer)
	}{
		{"duration", func(b *bytes.Buffer) { fieldBody(b, &durationDoc) }},
		{"attempts", func(b *bytes.Buffer) { fieldBody(b, &attemptsDoc) }},
		{"layout", func(b *bytes.Buffer) { enumBody(b, layouts) }},
		{"queueType", func(b *bytes.Buffer) { enumBody(b, queueTypes) }},
		{"arguments", func(b *bytes.Buffer) {
			b.WriteString(`"type":"object","additionalProperties":{"not":{"type":"null"}}`)
		}},
		{"retryPolicy", func(b *bytes.Buffer) { objectBody(b, retryPolicyObject, true) }},
		{"binding", func(b *bytes.Buffer) { objectBody(b, bindingObject, true) }},
		{"exchange", func(b *bytes.Buffer) { objectBody(b, exchangeObject, true) }},
		{"queue", func(b *bytes.Buffer) { objectBody(b, queueObject, true) }},
		{"policy", func(b *bytes.Buffer) { objectBody(b, policyObject, true) }},
		{"queueArguments", func(b *bytes.Buffer) { members(b, queueArgumentsSchema) }},
		{"springOptions", func(b *bytes.Buffer) { objectBody(b, springOptionsObject, true) }},
		{"goqueueOptions", func(b *bytes.Buffer) { objectBody(b, goqueueOptionsObject, true) }},
	}
	for i, d := range defs {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%s:{", jsonString(d.name))
		d.body(&b)
		b.WriteString("}")
	}
	b.WriteString("}}")
	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", "  "); err != nil {
		panic(fmt.Sprintf("spec: the generated schema is not JSON: %v", err)) // a field table's Schema or Examples is broken
	}
	out.WriteString("\n")
	return out.Bytes()
}

// objectBody writes the members of o's schema: with its title and
// description when it stands on its own (under $defs), without when a
// key's schema holds it inline.
func objectBody(b *bytes.Buffer, o schemaObject, own bool) {
	doc := o.doc()
	sep := ""
	if own && doc.Title != "" {
		fmt.Fprintf(b, `"title":%s,"description":%s,`, jsonString(doc.Title), jsonString(doc.Description))
	}
	b.WriteString(`"type":"object"`)
	if !doc.Open {
		b.WriteString(`,"additionalProperties":false`)
	}
	var required []string
	for _, f := range o.docs() {
		if f.Required {
			required = append(required, jsonString(f.Key))
		}
	}
	if len(required) > 0 {
		fmt.Fprintf(b, `,"required":[%s]`, strings.Join(required, ","))
	}
	b.WriteString(`,"properties":{`)
	for _, f := range o.docs() {
		fmt.Fprintf(b, "%s%s:{", sep, jsonString(f.Key))
		fieldBody(b, f)
		b.WriteString("}")
		sep = ","
	}
	b.WriteString("}")
	if doc.Schema != "" && doc.Name != "spec" {
		b.WriteString(",")
		members(b, doc.Schema)
	}
	rules := []string{}
	if doc.AllOf != "" {
		rules = append(rules, doc.AllOf)
	}
	if doc.RawRule {
		rules = append(rules, rawQueueRule(o))
	}
	if len(rules) > 0 {
		fmt.Fprintf(b, `,"allOf":[%s]`, strings.Join(rules, ","))
	}
}

// rawQueueRule is the schema's rule of a raw queue: it takes no key
// without Raw, and may be a stream; any other queue is durable, not
// auto-deleted, and classic or quorum.
func rawQueueRule(o schemaObject) string {
	var refused []string
	for _, f := range o.docs() {
		if !f.Raw {
			refused = append(refused, fmt.Sprintf(`{"required":[%s]}`, jsonString(f.Key)))
		}
	}
	return fmt.Sprintf(`{"if":{"required":["raw"],"properties":{"raw":{"const":true}}},`+
		`"then":{"not":{"anyOf":[%s]},"properties":{"type":{"enum":%s}}},`+
		`"else":{"properties":{"type":{"enum":%s},"durable":{"const":true},"auto_delete":{"const":false}}}}`,
		strings.Join(refused, ","), jsonValue(append(slices.Clone(queueTypes), TypeStream)), jsonValue(queueTypes))
}

// fieldBody writes the members of a key's schema.
func fieldBody(b *bytes.Buffer, f *fieldDoc) {
	var m []string
	add := func(k string, v any) { m = append(m, jsonString(k)+":"+jsonValue(v)) }
	if f.Ref != "" {
		add("$ref", "#/$defs/"+f.Ref)
	}
	add("title", f.Title)
	add("description", f.Description)
	if f.Type != "" && f.Inline == nil {
		add("type", f.Type)
	}
	if f.Pattern != "" {
		add("pattern", f.Pattern)
	}
	if f.MinLength > 0 {
		add("minLength", f.MinLength)
	}
	if f.Min != nil && *f.Min != math.MinInt64 {
		add("minimum", *f.Min)
	}
	if f.Max != nil && *f.Max != math.MaxInt64 {
		add("maximum", *f.Max)
	}
	if f.Enum != nil {
		add("enum", f.Enum)
	}
	if f.Default != nil {
		add("default", f.Default)
	}
	b.WriteString(strings.Join(m, ","))
	if f.Schema != "" {
		b.WriteString(",")
		members(b, f.Schema)
	}
	if f.Inline != nil {
		b.WriteString(",")
		objectBody(b, f.Inline, false)
	}
	if f.Examples != "" {
		b.WriteString(`,"examples":`)
		b.WriteString(f.Examples)
	}
}

func enumBody(b *bytes.Buffer, values []string) {
	fmt.Fprintf(b, `"type":"string","enum":%s`, jsonValue(values))
}

// members writes JSON object members given as text.
func members(b *bytes.Buffer, text string) { b.WriteString(text) }

func jsonString(s string) string { return jsonValue(s) }

// jsonValue is v as JSON, with <, > and & as written.
func jsonValue(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("spec: %v", err))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// keyTables are the objects docs/spec.md tables, by the name its markers
// give them.
var keyTables = map[string]schemaObject{
	"spec": specObject, "exchange": exchangeObject, "binding": bindingObject, "queue": queueObject, "policy": policyObject,
}

// Markers around a generated key table in docs/spec.md: the begin marker
// names the object, as in "<!-- keys queue: generated -->".
const (
	tableBegin = "<!-- keys "
	tableEnd   = "<!-- end keys -->"
)

// KeyTables returns doc, a Markdown document, with each key table between
// its markers replaced by the one generated from the field tables; the
// docs' tables are so kept (`go generate ./spec` rewrites docs/spec.md).
func KeyTables(doc []byte) ([]byte, error) {
	var out bytes.Buffer
	rest := string(doc)
	for {
		i := strings.Index(rest, tableBegin)
		if i < 0 {
			out.WriteString(rest)
			return out.Bytes(), nil
		}
		line, _, _ := strings.Cut(rest[i:], "\n")
		name, _, _ := strings.Cut(strings.TrimPrefix(line, tableBegin), ":")
		o, ok := keyTables[name]
		if !ok {
			return nil, fmt.Errorf("key table marker %q names no spec object", line)
		}
		j := strings.Index(rest[i:], tableEnd)
		if j < 0 {
			return nil, fmt.Errorf("key table %q has no %q", name, tableEnd)
		}
		out.WriteString(rest[:i] + line + "\n")
		out.WriteString(keyTable(o))
		rest = rest[i+j:]
	}
}

// keyTable is o's key table in Markdown.
func keyTable(o schemaObject) string {
	var b strings.Builder
	b.WriteString("| Key | Type | Default | Meaning |\n|---|---|---|---|\n")
	for _, f := range o.docs() {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", f.Key, f.Row.Type, f.Row.Default, f.Row.Meaning)
	}
	return b.String()
}
