// Command specgen writes what is generated from the spec's field tables
// (spec/fields_*.go): the JSON Schema schemas/rmqtopo.schema.json and the
// key tables of docs/spec.md. `go generate ./spec` (or `make generate`)
// runs it; spec's TestGeneratedFiles fails when the checked-in files
// differ from what it would write.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rmqtopo/rmqtopo/spec"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	flag.Parse()
	if err := run(*root); err != nil {
		fmt.Fprintln(os.Stderr, "specgen:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	if err := os.WriteFile(filepath.Join(root, "schemas", "rmqtopo.schema.json"), spec.JSONSchema(), 0o644); err != nil {
		return err
	}
	docPath := filepath.Join(root, "docs", "spec.md")
	doc, err := os.ReadFile(docPath)
	if err != nil {
		return err
	}
	out, err := spec.KeyTables(doc)
	if err != nil {
		return fmt.Errorf("%s: %w", docPath, err)
	}
	return os.WriteFile(docPath, out, 0o644)
}
