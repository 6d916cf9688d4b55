package importer_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/importer"
	"github.com/rmqtopo/rmqtopo/internal/definitions"
	"github.com/rmqtopo/rmqtopo/render"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

// fromDefinitions reads a definitions document the way plan --against
// does, for one vhost.
func fromDefinitions(t *testing.T, data []byte, vhost string) topology.Topology {
	t.Helper()
	doc, err := definitions.Decode(data, vhost)
	if err != nil {
		t.Fatal(err)
	}
	return definitions.Clean(doc.ToTopology(vhost))
}

// TestExamplesRoundTrip: every example, expanded and rendered as
// definitions, imports back into a spec that expands to the same
// topology, with every queue that has retry topology recognised, and a
// second import of that gives the same bytes.
func TestExamplesRoundTrip(t *testing.T) {
	paths, _ := filepath.Glob("../examples/*.yaml")
	presets, _ := filepath.Glob("../examples/presets/*.yaml")
	paths = append(paths, presets...)
	if len(paths) == 0 {
		t.Fatal("no examples")
	}
	for _, path := range paths {
		t.Run(filepath.Base(filepath.Dir(path))+"/"+filepath.Base(path), func(t *testing.T) {
			files, err := spec.LoadFiles(path)
			if err != nil {
				t.Fatal(err)
			}
			want := spec.Expand(files...)
			var defs bytes.Buffer
			if err := render.Definitions(&defs, want); err != nil {
				t.Fatal(err)
			}
			vhost := files[0].Spec.Vhost
			res, err := importer.Import(importer.Input{Vhost: vhost, Topology: fromDefinitions(t, defs.Bytes(), vhost), Source: "test"})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, spec.Expand(res.File)); diff != "" {
				t.Errorf("imported spec expands differently (-want +got):\n%s\n%s", diff, res.YAML)
			}
			if len(res.Skipped) > 0 {
				t.Errorf("skipped %v", res.Skipped)
			}
			if got, want := res.Recognised, len(files[0].Spec.Queues); got != want {
				t.Errorf("recognised %d queues with retry topology, want %d:\n%s", got, want, res.YAML)
			}
			again, err := importer.Import(importer.Input{Vhost: vhost, Topology: spec.Expand(res.File), Source: "test"})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(res.YAML), string(again.YAML)); diff != "" {
				t.Errorf("a re-import differs (-first +second):\n%s", diff)
			}
		})
	}
}
