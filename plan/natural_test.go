package plan

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestNaturalCompareShortcut: starting at the digit run where two names
// first differ gives what comparing them whole gives, and the order is
// total (0 only for equal strings) and antisymmetric.
func TestNaturalCompareShortcut(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := "a.0019"
	name := func() string {
		var b strings.Builder
		for range r.IntN(8) {
			b.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	for range 200000 {
		a, b := name(), name()
		got, want := NaturalCompare(a, b), wholeCompare(a, b)
		if got != want || NaturalCompare(b, a) != -want || (got == 0) != (a == b) {
			t.Fatalf("NaturalCompare(%q, %q) = %d, whole comparison %d", a, b, got, want)
		}
	}
}

// wholeCompare is NaturalCompare without the shared-prefix shortcut.
func wholeCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			switch {
			case len(na) != len(nb):
				return sign(len(na) - len(nb))
			case na != nb:
				return strings.Compare(na, nb)
			case da != db:
				return sign(da - db)
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return sign(int(a[0]) - int(b[0]))
		}
		a, b = a[1:], b[1:]
	}
	return sign(len(a) - len(b))
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}
