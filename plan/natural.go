package plan

import (
	"cmp"
	"strings"

	"github.com/rmqtopo/rmqtopo/topology"
)

// NaturalCompare orders strings with runs of digits compared as numbers,
// so that svc2 comes before svc10 (of equal numbers, fewer leading zeros
// first): -1, 0 or +1, and 0 only for equal strings. Every plan view, the
// changes of Diff and the groups of the Markdown plan, orders names by it.
func NaturalCompare(a, b string) int {
	// Most names share a long prefix; compare from the digit run, if any,
	// in which they start to differ.
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	if i == len(a) && i == len(b) {
		return 0
	}
	for i > 0 && isDigit(a[i-1]) {
		i--
	}
	a, b = a[i:], b[i:]
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if len(na) != len(nb) {
				return cmp.Compare(len(na), len(nb))
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			if da != db {
				return cmp.Compare(da, db)
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func digitRun(s string) int {
	n := 0
	for n < len(s) && isDigit(s[n]) {
		n++
	}
	return n
}

// compareAddresses orders addresses as plans list them: by vhost, name
// and key in natural order, then by kind.
func compareAddresses(a, b topology.Address) int {
	if c := NaturalCompare(a.Vhost, b.Vhost); c != 0 {
		return c
	}
	if c := NaturalCompare(a.Name, b.Name); c != 0 {
		return c
	}
	if c := NaturalCompare(a.Key, b.Key); c != 0 {
		return c
	}
	return cmp.Compare(a.Kind, b.Kind)
}
