package importer

import (
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNaturalLess(t *testing.T) {
	got := []string{"q10", "q2", "q1", "a", "q02", "q2a", "b1.wait.10.5s", "b1.wait.2.5s", ""}
	sort.Slice(got, func(i, j int) bool { return naturalLess(got[i], got[j]) })
	want := []string{"", "a", "b1.wait.2.5s", "b1.wait.10.5s", "q1", "q02", "q2", "q2a", "q10"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
