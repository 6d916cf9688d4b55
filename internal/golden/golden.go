// Package golden holds the tests of a feature's views to golden files in
// its testdata: the status and dlq views, each drawn in its own room, share
// this one check and its -update flag.
package golden

import (
	"flag"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// update rewrites the golden files from the current output:
// go test ./PKG -update, then review the diff.
var update = flag.Bool("update", false, "rewrite golden files in testdata")

// Assert fails t when the file at path differs from got; with -update it
// writes got there instead.
func Assert(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test with -update to create it, then review it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got); go test -update rewrites it:\n%s", path, diff)
	}
}
