package spec_test

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSchemaImportedSpecs: the specs rmqtopo import writes (the golden
// files of importer) pass the schema too, so an editor opening
// one flags nothing.
func TestSchemaImportedSpecs(t *testing.T) {
	sch := compileSchema(t)
	for _, path := range glob(t, "../importer/testdata/rabbitmq/*.yaml") {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := sch.Validate(instance(t, path, data)); err != nil {
				t.Errorf("schema rejects the imported spec:\n%v", err)
			}
		})
	}
}
