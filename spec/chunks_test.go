package spec

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// chunkCases are documents whose queue lists chunk, or must not.
var chunkCases = map[string]string{
	"plain": "version: 1\nexchanges:\n  - {name: biz, type: topic}\nqueues:\n  - name: a\n    bindings: [{exchange: biz, routing_key: k}]\n" +
		"    retry: {delays: [1s]}\n  - name: b\n    retry: {delays: [1s, 5s]}\n  - name: c\n    retry: {delays: []}\n",
	"unindented":      "version: 1\nqueues:\n- name: a\n  retry: {delays: [1s]}\n- name: b\n  retry: {delays: [2s]}\nlayout: per-attempt\n",
	"comments":        "version: 1\nqueues: # all of them\n\n  # first\n  - name: a\n# at the margin\n    retry: {delays: [1s]}\n\n  - name: b # second\n    retry: {delays: [1s]}\n",
	"crlf":            "version: 1\r\nqueues:\r\n  - name: a\r\n    retry: {delays: [1s]}\r\n  - name: b\r\n    retry: {delays: [1s]}\r\n",
	"dash alone":      "version: 1\nqueues:\n  -\n    name: a\n    retry: {delays: [1s]}\n  - name: b\n    retry: {delays: [1s]}\n",
	"refs after":      "version: 1\nqueues:\n  - name: a\n    retry: std\n  - name: b\n    retry: std\nretry_policies:\n  std: {delays: [1s]}\n",
	"inline merge":    "version: 1\nqueues:\n  - <<: {retry: {delays: [1s]}}\n    name: a\n  - name: b\n    retry: {delays: [1s]}\n",
	"anchors":         "version: 1\nqueues:\n  - name: a\n    retry: &r {delays: [1s]}\n  - name: b\n    retry: *r\n",
	"anchor in head":  "version: 1\nexchanges:\n  - {name: biz, type: topic, arguments: &args {alternate-exchange: x}}\nqueues:\n  - name: a\n    arguments: *args\n",
	"flow root":       "{version: 1,\nqueues:\n  - name: a\n}\n",
	"quote straddles": "version: 1\nqueues:\n  - name: \"a\n  - b\"\n    retry: {delays: [1s]}\n",
	"item errors":     "version: 1\nqueues:\n  - retry: {delays: [1s]}\n  - name: b\n    colour: red\n  - name: c\n    retry: {delays: [-1s]}\n",
	"twice":           "version: 1\nqueues:\n  - name: a\nqueues:\n  - name: b\n",
	"second document": "version: 1\nqueues:\n  - name: a\n---\nversion: 1\n",
	"stray key":       "version: 1\nqueues:\n  - name: a\n  name: b\n",
	"tab":             "version: 1\nqueues:\n  - name: a\n\t- name: b\n",
	"flow list":       "version: 1\nqueues: [\n  {name: a}]\n",
	"list in list":    "version: 1\nqueues:\n  - - name: a\n",
}

// TestChunkedParseIsTheWholeParse parses every fixture, example and case
// with its queues chunked, down to one queue a chunk, and wants exactly
// what parsing the whole document gives: the file or the errors.
func TestChunkedParseIsTheWholeParse(t *testing.T) {
	docs := map[string][]byte{}
	for name, src := range chunkCases {
		docs[name] = []byte(src)
	}
	paths, err := filepath.Glob("testdata/invalid/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range append(paths, examplePaths(t)...) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		docs[p] = data
	}
	whole := chunking{minSize: math.MaxInt, items: 1}
	opts := cmp.AllowUnexported(Spec{}, Exchange{}, Binding{}, Queue{}, PresetOptions{}, Policy{}, pos{}, keyAt{}, resolution{})
	for name, data := range docs {
		want, _, wantErr := parseWith("s.yaml", data, whole)
		for _, per := range []int{1, 2, 1024} {
			got, _, gotErr := parseWith("s.yaml", data, chunking{items: per})
			if diff := cmp.Diff(want, got, opts); diff != "" {
				t.Errorf("%s, %d a chunk: file differs (-whole +chunked):\n%s", name, per, diff)
			}
			if diff := cmp.Diff(errorText(wantErr), errorText(gotErr)); diff != "" {
				t.Errorf("%s, %d a chunk: errors differ (-whole +chunked):\n%s", name, per, diff)
			}
		}
	}
}

func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestChunksAreUsed checks that plainly laid out lists do chunk, and that
// the others give up, so the test above compares something.
func TestChunksAreUsed(t *testing.T) {
	chunked := map[string]bool{"plain": true, "unindented": true, "comments": true, "crlf": true, "dash alone": true,
		"refs after": true, "inline merge": true}
	for name, src := range chunkCases {
		head, queues := splitQueues([]byte(src), chunking{items: 1})
		ok := queues != nil
		if ok {
			_, _, err := parseChunked("s.yaml", head, len(src), queues)
			ok = err == nil && !queues.failed
		}
		if ok != chunked[name] {
			t.Errorf("%s: chunked = %t, want %t", name, ok, chunked[name])
		}
	}
	for _, p := range examplePaths(t) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		head, queues := splitQueues(data, chunking{items: 2})
		if queues == nil {
			continue // not every example lists its queues plainly
		}
		if _, _, err := parseChunked(p, head, len(data), queues); err != nil || queues.failed {
			var es Errors
			if errors.As(err, &es) || queues.failed {
				t.Errorf("%s: chunks gave up (%v)", p, err)
			}
		}
	}
}

// TestChunkedPositions checks that problems inside chunks point at the
// file's lines, not the chunk's.
func TestChunkedPositions(t *testing.T) {
	src := "version: 1\nqueues:\n" +
		"  - name: a\n    retry: {delays: [1s]}\n  - name: b\n    retry: {delays: [1s]}\n  - name: c\n    colour: red\n"
	head, queues := splitQueues([]byte(src), chunking{items: 1})
	if queues == nil {
		t.Fatal("not chunked")
	}
	_, _, err := parseChunked("s.yaml", head, len(src), queues)
	var es Errors
	if !errors.As(err, &es) || len(es) != 1 || es[0].Line != 8 || es[0].Column != 5 {
		t.Fatalf("errors = %v, want one at 8:5", err)
	}
}
