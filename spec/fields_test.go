package spec

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFieldTables: every key of every object decodes, has a title and a
// description for editors, and a schema default that is what a decoded
// object starts with; the docs' tables have a row for each key.
func TestFieldTables(t *testing.T) {
	for name, o := range map[string]schemaObject{"spec": specObject, "levels": levelsObject, "retryPolicy": retryPolicyObject,
		"fixed": fixedObject, "linear": linearObject, "exponential": exponentialObject, "binding": bindingObject,
		"exchange": exchangeObject, "queue": queueObject, "policy": policyObject, "springOptions": springOptionsObject,
		"goqueueOptions": goqueueOptionsObject} {
		_, tabled := keyTables[name]
		for _, f := range o.docs() {
			if f.Title == "" || f.Description == "" {
				t.Errorf("%s.%s: no title or description for editors", name, f.Key)
			}
			if tabled && (f.Row.Type == "" || f.Row.Default == "" || f.Row.Meaning == "") {
				t.Errorf("%s.%s: no row for the docs' key table", name, f.Key)
			}
		}
	}
	zero := newQueue()
	for _, f := range queueObject.fields {
		if f.decode == nil {
			t.Errorf("queue.%s: no decoder", f.Key)
		}
		if f.value != nil && f.Default != nil && f.value(&zero) != f.Default {
			t.Errorf("queue.%s: the schema's default %v is not a new queue's %v", f.Key, f.Default, f.value(&zero))
		}
	}
}

// TestRawKeys: the keys a raw queue takes are the ones its docs name.
func TestRawKeys(t *testing.T) {
	var raw []string
	for _, f := range queueObject.fields {
		if f.Raw {
			raw = append(raw, f.Key)
		}
	}
	slices.Sort(raw)
	want := []string{"arguments", "auto_delete", "bindings", "durable", "name", "raw", "type"}
	if diff := cmp.Diff(want, raw); diff != "" {
		t.Errorf("raw queue keys (-want +got):\n%s", diff)
	}
}

// TestQueueValueRoundTrips: what QueueValue gives for each key, written
// into a spec, reads back as the same value, and a queue without the key
// writes nothing for it.
func TestQueueValueRoundTrips(t *testing.T) {
	for _, tc := range []struct{ name, yaml string }{
		{"quorum", "type: quorum\n    immediate_retries: 2\n    layout: per-attempt\n    retry: {delays: [1s]}\n    parking_lot: true\n    message_ttl: 90s\n    max_length: 7\n    delivery_limit: 5"},
		{"classic", "dlq: false\n    return_queue: true\n    layout: shared\n    retry: {delays: [1s]}"},
		{"preset", "preset: goqueue\n    retry: {delays: [1s]}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := fmt.Sprintf("version: 1\nqueues:\n  - name: q\n    %s\n", tc.yaml)
			f, err := Parse("round.yaml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			q := f.Spec.Queues[0]
			var written []string
			for _, fd := range queueObject.fields {
				v, ok := QueueValue(q, fd.Key)
				if !ok {
					continue
				}
				written = append(written, fmt.Sprintf("%s: %v", fd.Key, v))
				if !strings.Contains(src, fmt.Sprintf("%s: %v", fd.Key, v)) {
					t.Errorf("QueueValue(%s) = %v, not what the spec says:\n%s", fd.Key, v, src)
				}
			}
			for _, line := range strings.Split(tc.yaml, "\n") {
				key, _, _ := strings.Cut(strings.TrimSpace(line), ":")
				if f := queueObject.field(key); f != nil && f.value != nil && !slices.ContainsFunc(written, func(w string) bool { return strings.HasPrefix(w, key+":") }) {
					t.Errorf("the spec sets %s but QueueValue writes nothing for it (wrote %v)", key, written)
				}
			}
		})
	}
	if v, ok := QueueValue(newQueue(), "dlq"); ok {
		t.Errorf("a new queue writes dlq: %v, want nothing", v)
	}
}

// TestWrittenList: a key whose value is a list (not comparable with ==)
// is written when it has items and not when it has none.
func TestWrittenList(t *testing.T) {
	o := newObject(objectDoc{Name: "test"}, field[Queue]{fieldDoc: fieldDoc{Key: "bindings"},
		value: func(q *Queue) any { return q.Bindings }})
	zero := newQueue()
	if v, ok := o.written(&Queue{Bindings: []Binding{}}, &zero, "bindings"); ok {
		t.Errorf("an empty list is written: %v", v)
	}
	q := Queue{Bindings: []Binding{{Exchange: "x"}}}
	if v, ok := o.written(&q, &zero, "bindings"); !ok || !cmp.Equal(v, q.Bindings, cmp.AllowUnexported(Binding{}, pos{})) {
		t.Errorf("written = %v, %t; want the binding", v, ok)
	}
}
