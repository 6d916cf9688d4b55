package spec_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/topology"
)

// TestSchemaArgumentsAreTheKeyTable: the schema's queue arguments are the
// key table's, the one list spec validation reads.
func TestSchemaArgumentsAreTheKeyTable(t *testing.T) {
	defs := rawSchema(t)["$defs"].(map[string]any)
	props := defs["queueArguments"].(map[string]any)["properties"].(map[string]any)
	var inSchema []string
	for k := range props {
		inSchema = append(inSchema, k)
	}
	slices.Sort(inSchema)
	if diff := cmp.Diff(topology.QueueArgumentNames(), inSchema); diff != "" {
		t.Errorf("schema's queueArguments against topology.QueueArgumentNames (-table +schema):\n%s", diff)
	}
}
