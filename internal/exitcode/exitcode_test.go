package exitcode

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestTable: the codes are distinct, and docs/exit-codes.md has a row
// for each.
func TestTable(t *testing.T) {
	b, err := os.ReadFile("../../docs/exit-codes.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, c := range []int{Failure, Changes, DLQNotEmpty, Refused, Missing, Drift, DeadLettersStuck, UpgradeRefused, UpgradeWarnings} {
		if seen[c] {
			t.Errorf("code %d means two things", c)
		}
		seen[c] = true
		if !strings.Contains(string(b), "\n| "+strconv.Itoa(c)+" | ") {
			t.Errorf("docs/exit-codes.md has no row for %d", c)
		}
	}
}
