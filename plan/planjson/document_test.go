package planjson

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestJSONPlanDocumented: every field of the JSON plan's one definition
// (documentJSON, Change) is described in docs/plan-json.md:
// the document's in its outline, each change field by a row of the
// Change table.
func TestJSONPlanDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/plan-json.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, name := range jsonNames(reflect.TypeFor[documentJSON]()) {
		if !strings.Contains(doc, `  "`+name+`": `) {
			t.Errorf("docs/plan-json.md's outline has no field %q", name)
		}
	}
	for _, name := range jsonNames(reflect.TypeFor[Change]()) {
		if !strings.Contains(doc, "| `"+name+"` |") {
			t.Errorf("docs/plan-json.md's Change table has no row for %q", name)
		}
	}
}

func jsonNames(t reflect.Type) []string {
	var out []string
	for _, f := range reflect.VisibleFields(t) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		out = append(out, name)
	}
	return out
}
