package spec_test

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/spec"
)

// TestGeneratedFiles: the JSON Schema and the key tables of docs/spec.md
// are what the field tables (spec/fields_*.go) generate, so that a key
// added, or a description changed, reaches editors and the docs.
func TestGeneratedFiles(t *testing.T) {
	schema, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(lines(spec.JSONSchema()), lines(schema)); diff != "" {
		t.Errorf("%s is not what spec/fields_*.go generate; run `go generate ./spec` (or `make generate`) and commit it (-generated +file):\n%s", schemaPath, diff)
	}
	const docPath = "../docs/spec.md"
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	want, err := spec.KeyTables(doc)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(lines(want), lines(doc)); diff != "" {
		t.Errorf("the key tables of %s are not what spec/fields_*.go generate; run `go generate ./spec` (or `make generate`) and commit it (-generated +file):\n%s", docPath, diff)
	}
	if n := strings.Count(string(doc), "<!-- keys "); n != 5 {
		t.Errorf("%s has %d generated key tables, want 5 (top level, exchange, binding, queue, policy)", docPath, n)
	}
}

func lines(b []byte) []string { return strings.Split(string(b), "\n") }
