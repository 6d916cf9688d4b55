package english

import "testing"

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "queues", 1: "queue", 2: "queues"} {
		if got := Plural(n, "queue", "queues"); got != want {
			t.Errorf("Plural(%d) = %q, want %q", n, got, want)
		}
	}
}
