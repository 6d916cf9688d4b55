package spec

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/internal/definitions"
)

// FuzzParse feeds arbitrary bytes to the loader. It must never panic; a
// rejected file must come with Errors that all point into the file; an
// accepted file must expand (twice, identically), schedule and encode as
// definitions JSON, because validate promised it would.
//
//	go test -run '^$' -fuzz FuzzParse -fuzztime 60s ./spec/
func FuzzParse(f *testing.F) {
	seeds, err := filepath.Glob("testdata/invalid/*.yaml")
	if err != nil {
		f.Fatal(err)
	}
	seeds = append(seeds, examplePaths(f)...)
	for _, p := range seeds {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	const name = "fuzz.yaml"
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(name, data)
		// Chunked down to a queue a chunk, whatever the size, the parse
		// must be the same (chunks.go).
		chunked, _, cerr := parseWith(name, data, chunking{items: 1})
		if diff := cmp.Diff(file, chunked, cmp.AllowUnexported(Spec{}, Exchange{}, Binding{}, Queue{}, PresetOptions{}, Policy{}, pos{}, keyAt{}, resolution{})); diff != "" {
			t.Fatalf("chunked parse differs (-whole +chunked):\n%s", diff)
		}
		if errorText(err) != errorText(cerr) {
			t.Fatalf("chunked parse errors differ:\n%v\n%v", err, cerr)
		}
		if err != nil {
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("Parse error is %T, not Errors: %v", err, err)
			}
			if file != nil {
				t.Fatalf("Parse returned a file and errors")
			}
			if len(es) == 0 {
				t.Fatalf("Parse returned empty Errors")
			}
			for _, e := range es {
				if e.File != name || e.Line < 1 || e.Column < 1 || e.Message == "" {
					t.Fatalf("error without a position or message: %#v", e)
				}
			}
			return
		}
		if file == nil {
			t.Fatal("Parse returned neither a file nor errors")
		}
		top := Expand(file)
		if diff := cmp.Diff(top, Expand(file)); diff != "" {
			t.Fatalf("Expand is not deterministic (-first +second):\n%s", diff)
		}
		for _, q := range file.Spec.Queues {
			steps := file.Spec.Schedule(q)
			if len(steps) != 1+q.ImmediateRetries+len(q.Retry.Delays()) {
				t.Fatalf("queue %s: %d schedule steps", q.Name, len(steps))
			}
		}
		if _, err := json.Marshal(definitions.FromTopology(top)); err != nil {
			t.Fatalf("valid spec does not encode as definitions: %v", err)
		}
	})
}
