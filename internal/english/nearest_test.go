package english

import "testing"

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{
		{"max-lenght", "max-length", 1}, // a transposition is one edit
		{"", "abc", 3}, {"abc", "", 3}, {"", "", 0},
		{"expires", "expires", 0},
		{"mesage-ttl", "message-ttl", 1},
		{"x-mesage-tll", "x-message-ttl", 2},
		{"ab", "ba", 1}, {"abc", "ca", 3},
		{"größe", "grösse", 2}, // runes, not bytes: ß is one letter
	} {
		if got := EditDistance(tc.a, tc.b); got != tc.d {
			t.Errorf("EditDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
}

func TestNearest(t *testing.T) {
	known := []string{"max-length", "max-length-bytes", "message-ttl"}
	for _, tc := range []struct {
		word   string
		within int
		want   string
	}{
		{"max-lenght", 2, "max-length"},
		{"mesage-ttl", 1, "message-ttl"},
		{"max-length-byte", 1, "max-length-bytes"},
		{"no-such-thing-at-all", 3, ""},
		{"max-len", 2, ""}, // three edits away
		{"max-len", 3, "max-length"},
	} {
		if got := Nearest(tc.word, known, tc.within); got != tc.want {
			t.Errorf("Nearest(%q, within %d) = %q, want %q", tc.word, tc.within, got, tc.want)
		}
	}
}
