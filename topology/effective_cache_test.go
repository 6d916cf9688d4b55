package topology

import (
	"fmt"
	"testing"
)

// TestPatternCacheBounded compiles more distinct patterns than the cache
// keeps: it never holds more than maxCachedPatterns, and patterns still
// match after it was emptied.
func TestPatternCacheBounded(t *testing.T) {
	for i := range maxCachedPatterns + 500 {
		p := Policy{Pattern: fmt.Sprintf("^q%d[.]", i)}
		if !p.matchesName(fmt.Sprintf("q%d.x", i)) {
			t.Fatalf("pattern %q does not match", p.Pattern)
		}
	}
	n := 0
	patterns.Range(func(any, any) bool { n++; return true })
	if n > maxCachedPatterns {
		t.Errorf("cache holds %d patterns, want at most %d", n, maxCachedPatterns)
	}
	if !(Policy{Pattern: "^q1[.]"}).matchesName("q1.y") {
		t.Error("a pattern compiled before the cache was emptied no longer matches")
	}
}
