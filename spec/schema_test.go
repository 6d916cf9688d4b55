package spec_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/rmqtopo/rmqtopo/spec"
)

// The JSON Schema in schemas/ is what editors validate specs with while they
// are typed; spec.Parse is what rmqtopo validates them with. These tests keep
// the two in step: the examples pass both, the invalid fixtures fail both, and
// every object accepts the same keys in both.

const schemaPath = "../schemas/rmqtopo.schema.json"

var (
	examplesGlobs = []string{"../examples/*.yaml", "../examples/presets/*.yaml"}
	invalidGlob   = "testdata/schema/invalid/*.yaml"
)

// compileSchema compiles the schema with a real draft 2020-12 validator,
// which also checks the schema itself against the 2020-12 metaschema.
func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	sch, err := jsonschema.NewCompiler().Compile(schemaPath)
	if err != nil {
		t.Fatalf("compile %s: %v", schemaPath, err)
	}
	return sch
}

// rawSchema is the schema as plain JSON values, for walking its properties.
// Numbers are int64 where whole, float64 otherwise, as yaml.v3 encodes them.
func rawSchema(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: %v", schemaPath, err)
	}
	return numbers(v).(map[string]any)
}

func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	}
	return v
}

// instance turns a YAML document into the JSON value a YAML language server
// validates: yaml.v3 decodes into any, mappings are normalised to
// map[string]any, and a JSON round trip gives the validator its own types.
func instance(t *testing.T, name string, data []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	j, err := json.Marshal(jsonCompatible(v))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return inst
}

func jsonCompatible(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonCompatible(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = jsonCompatible(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonCompatible(e)
		}
		return out
	}
	return v
}

func glob(t *testing.T, patterns ...string) []string {
	t.Helper()
	var files []string
	for _, p := range patterns {
		m, err := filepath.Glob(p)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Fatalf("no files match %v", patterns)
	}
	return files
}

func TestSchemaExamples(t *testing.T) {
	sch := compileSchema(t)
	for _, path := range glob(t, examplesGlobs...) {
		t.Run(filepath.ToSlash(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// The modeline is what makes editors pick the schema up, so it
			// must come first and point at the schema from where the file is.
			first, _, _ := strings.Cut(string(data), "\n")
			ref, ok := strings.CutPrefix(first, "# yaml-language-server: $schema=")
			if !ok {
				t.Errorf("first line is %q; want a \"# yaml-language-server: $schema=...\" modeline", first)
			} else if got := filepath.Join(filepath.Dir(path), filepath.FromSlash(ref)); got != filepath.Clean(schemaPath) {
				t.Errorf("modeline points at %s; want %s", got, filepath.Clean(schemaPath))
			}
			if err := sch.Validate(instance(t, path, data)); err != nil {
				t.Errorf("schema rejects the example:\n%v", err)
			}
			if _, err := spec.Parse(path, data); err != nil {
				t.Errorf("spec.Parse rejects the example:\n%v", err)
			}
		})
	}
}

// TestSchemaInvalidFixtures checks that each fixture fails both the schema
// and spec.Parse, for the same reason: each fixture starts with one or more
// "# parse: TEXT" lines that spec.Parse's error must contain, and every
// problem spec.Parse reports must have a schema error at the same place (or,
// for a key the object does not allow, at the object holding it).
func TestSchemaInvalidFixtures(t *testing.T) {
	sch := compileSchema(t)
	for _, path := range glob(t, invalidGlob) {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".yaml"), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var wants []string
			for _, line := range strings.Split(string(data), "\n") {
				if w, ok := strings.CutPrefix(line, "# parse: "); ok {
					wants = append(wants, w)
				}
			}
			if len(wants) == 0 {
				t.Fatal(`fixture has no "# parse: TEXT" line naming spec.Parse's error`)
			}

			_, perr := spec.Parse(path, data)
			var es spec.Errors
			if !errors.As(perr, &es) {
				t.Fatalf("spec.Parse accepts the fixture (err = %v)", perr)
			}
			for _, w := range wants {
				if !strings.Contains(perr.Error(), w) {
					t.Errorf("spec.Parse error does not mention %q:\n%v", w, perr)
				}
			}

			verr := sch.Validate(instance(t, path, data))
			if verr == nil {
				t.Fatalf("schema accepts the fixture; spec.Parse says:\n%v", perr)
			}
			var ve *jsonschema.ValidationError
			if !errors.As(verr, &ve) {
				t.Fatalf("validate: %v", verr)
			}
			// Places agree when they are the same, or one holds the other:
			// an unknown key is the schema's error about its object, and a
			// rule about one key may be the decoder's error about the object.
			at, near := map[string]bool{}, map[string]bool{}
			schemaErrorLocations(ve, at)
			for loc := range at {
				near[loc], near[parent(loc)] = true, true
			}
			for _, e := range es {
				p := pointer(e.Path)
				if !near[p] && !at[parent(p)] {
					t.Errorf("spec.Parse reports %q at %q, but the schema reports nothing there, at its parent or at a child:\n%v",
						e.Message, p, verr)
				}
			}
		})
	}
}

// schemaErrorLocations collects where the schema's leaf errors are: the
// inner nodes of the error tree only say which $ref or items led there.
func schemaErrorLocations(ve *jsonschema.ValidationError, at map[string]bool) {
	if len(ve.Causes) == 0 {
		loc := ""
		for _, s := range ve.InstanceLocation {
			loc += "/" + s
		}
		at[loc] = true
	}
	for _, c := range ve.Causes {
		schemaErrorLocations(c, at)
	}
}

func parent(ptr string) string { return ptr[:max(0, strings.LastIndex(ptr, "/"))] }

var indexRE = regexp.MustCompile(`\[(\d+)\]`)

// pointer turns a spec.Error path such as "queues[0].retry.fixed" into a JSON
// pointer, "/queues/0/retry/fixed".
func pointer(path string) string {
	if path == "" {
		return ""
	}
	return "/" + strings.ReplaceAll(indexRE.ReplaceAllString(path, ".$1"), ".", "/")
}

// object is one kind of mapping the decoder walks strictly, located both in
// the schema and in a probe document.
type object struct {
	name string
	// schema is the JSON pointer of the object's subschema.
	schema string
	// path is the object's path in spec.Error terms within probeDoc.
	path string
	// in returns the object inside doc, reshaping doc if it must.
	in func(doc map[string]any) map[string]any
	// exclusive objects take one key at a time.
	exclusive bool
}

func m(kv ...any) map[string]any {
	out := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

func l(v ...any) []any { return v }

// probeDoc is a small valid spec with one object of every kind. Its queue
// binds to a built-in exchange so that replacing exchanges leaves it valid.
// Its layout is levels, the one every retry policy key (jitter too) allows.
func probeDoc() map[string]any {
	return m(
		"version", 1,
		"layout", "levels",
		"retry_policies", m("standard", m("delays", l("1s"))),
		"exchanges", l(m("name", "events", "type", "topic", "bindings", l(m("exchange", "amq.topic")))),
		"queues", l(m("name", "work", "type", "quorum", "bindings", l(m("exchange", "amq.direct")), "retry", m("delays", l("1s")))),
		"policies", l(m("name", "limits", "pattern", "^work$", "definition", m("max-length", 10))),
	)
}

func elem(v any, key string, i int) map[string]any {
	return v.(map[string]any)[key].([]any)[i].(map[string]any)
}

func queue(doc map[string]any) map[string]any { return elem(doc, "queues", 0) }

// schedule replaces the queue's retry with one schedule of the given kind
// and returns the schedule's parameters.
func schedule(kind string, params map[string]any) func(map[string]any) map[string]any {
	return func(doc map[string]any) map[string]any {
		queue(doc)["retry"] = m(kind, params)
		return params
	}
}

var objects = []object{
	{name: "spec", schema: "", path: "", in: func(d map[string]any) map[string]any { return d }},
	{name: "exchange", schema: "/$defs/exchange", path: "exchanges[0]",
		in: func(d map[string]any) map[string]any { return elem(d, "exchanges", 0) }},
	{name: "exchange binding", schema: "/$defs/binding", path: "exchanges[0].bindings[0]",
		in: func(d map[string]any) map[string]any { return elem(elem(d, "exchanges", 0), "bindings", 0) }},
	{name: "queue", schema: "/$defs/queue", path: "queues[0]", in: queue},
	{name: "queue binding", schema: "/$defs/binding", path: "queues[0].bindings[0]",
		in: func(d map[string]any) map[string]any { return elem(queue(d), "bindings", 0) }},
	{name: "inline retry policy", schema: "/$defs/retryPolicy", path: "queues[0].retry", exclusive: true,
		in: func(d map[string]any) map[string]any { return queue(d)["retry"].(map[string]any) }},
	{name: "named retry policy", schema: "/$defs/retryPolicy", path: "retry_policies.standard", exclusive: true,
		in: func(d map[string]any) map[string]any {
			return d["retry_policies"].(map[string]any)["standard"].(map[string]any)
		}},
	{name: "fixed", schema: "/$defs/retryPolicy/properties/fixed", path: "queues[0].retry.fixed",
		in: func(d map[string]any) map[string]any {
			return schedule("fixed", m("delay", "1s", "attempts", 2))(d)
		}},
	{name: "linear", schema: "/$defs/retryPolicy/properties/linear", path: "queues[0].retry.linear",
		in: func(d map[string]any) map[string]any {
			return schedule("linear", m("step", "1s", "attempts", 2))(d)
		}},
	{name: "exponential", schema: "/$defs/retryPolicy/properties/exponential", path: "queues[0].retry.exponential",
		in: func(d map[string]any) map[string]any {
			return schedule("exponential", m("initial", "1s", "factor", 2, "attempts", 2))(d)
		}},
	{name: "levels", schema: "/properties/levels", path: "levels",
		in: func(d map[string]any) map[string]any {
			d["levels"] = m("resolution", "100ms")
			return d["levels"].(map[string]any)
		}},
	{name: "policy", schema: "/$defs/policy", path: "policies[0]",
		in: func(d map[string]any) map[string]any { return elem(d, "policies", 0) }},
	{name: "spring options", schema: "/$defs/springOptions", path: "queues[0].preset_options",
		in: presetOptions("spring")},
	{name: "goqueue options", schema: "/$defs/goqueueOptions", path: "queues[0].preset_options",
		in: presetOptions("goqueue")},
}

// presetOptions gives the probe queue the preset and returns its (empty)
// preset_options, whose keys depend on the preset.
func presetOptions(preset string) func(map[string]any) map[string]any {
	return func(d map[string]any) map[string]any {
		q := queue(d)
		q["preset"] = preset
		opts := m()
		q["preset_options"] = opts
		return opts
	}
}

// resolve follows a JSON pointer within the schema document.
func resolve(t *testing.T, root map[string]any, ptr string) map[string]any {
	t.Helper()
	var v any = root
	for _, tok := range strings.Split(ptr, "/")[1:] {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		obj, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("schema pointer %q: %q is not in an object", ptr, tok)
		}
		if v, ok = obj[tok]; !ok {
			t.Fatalf("schema pointer %q: no %q", ptr, tok)
		}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("schema pointer %q is not an object", ptr)
	}
	return obj
}

func sortedKeys(obj map[string]any) []string {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// check runs doc through yaml.v3, spec.Parse and the schema, as a spec file
// would be.
func check(t *testing.T, sch *jsonschema.Schema, doc map[string]any) (data []byte, parseErr, schemaErr error) {
	t.Helper()
	data, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	_, parseErr = spec.Parse("probe.yaml", data)
	schemaErr = sch.Validate(instance(t, "probe.yaml", data))
	return data, parseErr, schemaErr
}

const bogus = "zz_not_a_key"

var unknownKeyRE = regexp.MustCompile(`^unknown key "` + bogus + `" \(expected one of: (.*)\)$`)

// decoderKeys asks spec.Parse which keys it accepts at o: its error for an
// unknown key lists them all.
func decoderKeys(t *testing.T, sch *jsonschema.Schema, o object) []string {
	t.Helper()
	doc := probeDoc()
	o.in(doc)[bogus] = true
	data, perr, serr := check(t, sch, doc)
	if serr == nil {
		t.Errorf("schema accepts the unknown key %q in the %s:\n%s", bogus, o.name, data)
	}
	var es spec.Errors
	if !errors.As(perr, &es) {
		t.Fatalf("spec.Parse accepts the unknown key %q in the %s (err = %v):\n%s", bogus, o.name, perr, data)
	}
	want := o.path + "." + bogus
	if o.path == "" {
		want = bogus
	}
	for _, e := range es {
		if mm := unknownKeyRE.FindStringSubmatch(e.Message); mm != nil && e.Path == want {
			return strings.Split(mm[1], ", ")
		}
	}
	t.Fatalf("spec.Parse gave no \"unknown key\" error at %s listing the accepted keys:\n%v", want, perr)
	return nil
}

// TestSchemaDrift fails when the schema and the decoder disagree about
// which keys an object takes, or when a value the schema offers (its
// examples, enums and defaults) is one spec.Parse refuses.
func TestSchemaDrift(t *testing.T) {
	sch := compileSchema(t)
	raw := rawSchema(t)

	if _, perr, serr := check(t, sch, probeDoc()); perr != nil || serr != nil {
		t.Fatalf("the probe document must be valid:\nspec.Parse: %v\nschema: %v", perr, serr)
	}

	// Every strict object in the schema must be probed here, so a new one
	// cannot slip past this test.
	var strict []string
	walkSchema(raw, "", func(ptr string, obj map[string]any) {
		if obj["additionalProperties"] == false {
			strict = append(strict, ptr)
		}
	})
	var probed []string
	for _, o := range objects {
		probed = append(probed, o.schema)
	}
	slices.Sort(strict)
	slices.Sort(probed)
	if diff := cmp.Diff(slices.Compact(strict), slices.Compact(probed)); diff != "" {
		t.Errorf("strict objects in the schema vs objects this test probes (-want +got):\n%s", diff)
	}

	for _, o := range objects {
		t.Run(o.name, func(t *testing.T) {
			sub := resolve(t, raw, o.schema)
			if sub["additionalProperties"] != false {
				t.Errorf("schema %q does not set additionalProperties: false, but spec.Parse refuses unknown keys there", o.schema)
			}
			props, _ := sub["properties"].(map[string]any)

			want := decoderKeys(t, sch, o)
			got := sortedKeys(props)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("keys of the %s: spec.Parse (want) vs schema %s/properties (got) (-want +got):\n%s", o.name, o.schema, diff)
			}

			for _, key := range got {
				values := sampleValues(t, raw, props[key].(map[string]any))
				if len(values) == 0 {
					t.Errorf("%s.%s: the schema gives no examples, enum or default to probe spec.Parse with", o.name, key)
				}
				for _, v := range values {
					doc := probeDoc()
					obj := o.in(doc)
					if o.exclusive {
						clear(obj)
					}
					obj[key] = v
					data, perr, serr := check(t, sch, doc)
					if perr != nil {
						t.Errorf("%s.%s = %#v: the schema offers it but spec.Parse refuses:\n%v\n%s", o.name, key, v, perr, data)
					}
					if serr != nil {
						t.Errorf("%s.%s = %#v: the schema offers it but refuses it:\n%v\n%s", o.name, key, v, serr, data)
					}
				}
			}
		})
	}
}

// sampleValues gathers the values a property's schema offers an editor
// user: its examples, enum, const and default, then those of its anyOf and
// oneOf branches, and, when it has none of its own, those of what it $refs.
func sampleValues(t *testing.T, root, prop map[string]any) []any {
	t.Helper()
	var out []any
	if ex, ok := prop["examples"].([]any); ok {
		out = append(out, ex...)
	}
	if en, ok := prop["enum"].([]any); ok {
		out = append(out, en...)
	}
	for _, k := range []string{"const", "default"} {
		if v, ok := prop[k]; ok {
			out = append(out, v)
		}
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		branches, _ := prop[k].([]any)
		for _, b := range branches {
			out = append(out, sampleValues(t, root, b.(map[string]any))...)
		}
	}
	if ref, ok := prop["$ref"].(string); ok && len(out) == 0 {
		out = sampleValues(t, root, resolve(t, root, strings.TrimPrefix(ref, "#")))
	}
	return out
}

// walkSchema calls f for every subschema object, with its JSON pointer.
// It skips annotation values such as examples, which hold instances.
func walkSchema(v any, ptr string, f func(string, map[string]any)) {
	switch x := v.(type) {
	case map[string]any:
		f(ptr, x)
		for k, e := range x {
			switch k {
			case "examples", "default", "const", "enum":
				continue
			}
			walkSchema(e, ptr+"/"+strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1"), f)
		}
	case []any:
		for i, e := range x {
			walkSchema(e, fmt.Sprintf("%s/%d", ptr, i), f)
		}
	}
}

// TestSchemaDocumented checks what editors need for hover docs, and that
// the schema stays within keywords draft-7 based YAML language servers
// understand (they ignore newer ones, silently accepting what they check).
func TestSchemaDocumented(t *testing.T) {
	raw := rawSchema(t)
	if raw["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema = %v; want draft 2020-12", raw["$schema"])
	}
	if id, _ := raw["$id"].(string); id == "" {
		t.Error("the schema has no $id")
	}
	newer := []string{"unevaluatedProperties", "unevaluatedItems", "dependentRequired", "dependentSchemas",
		"prefixItems", "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "minContains", "maxContains"}
	walkSchema(raw, "", func(ptr string, obj map[string]any) {
		for _, k := range newer {
			if _, ok := obj[k]; ok {
				t.Errorf("%s uses %s, which draft-7 based editors ignore", ptr, k)
			}
		}
		if obj["type"] != "object" {
			return // e.g. the properties of an if/then condition
		}
		props, _ := obj["properties"].(map[string]any)
		for _, key := range sortedKeys(props) {
			p, _ := props[key].(map[string]any)
			for _, ann := range []string{"title", "description"} {
				if s, _ := p[ann].(string); strings.TrimSpace(s) == "" {
					t.Errorf("%s/properties/%s has no %s for editors to show", ptr, key, ann)
				}
			}
		}
	})
}
