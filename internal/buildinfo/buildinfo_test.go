package buildinfo

import (
	"runtime/debug"
	"testing"
)

// TestVersionString: build information wins where it has a value, the
// Makefile's -ldflags fill the gaps.
func TestString(t *testing.T) {
	info := func(v string, settings ...debug.BuildSetting) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			return &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: v}, Settings: settings}, true
		}
	}
	rev := debug.BuildSetting{Key: "vcs.revision", Value: "abc123"}
	dirty := debug.BuildSetting{Key: "vcs.modified", Value: "true"}
	for _, c := range []struct {
		name, stampV, stampR string
		read                 func() (*debug.BuildInfo, bool)
		want                 string
	}{
		{"go install @version", "", "", info("v1.2.3"), "rmqtopo v1.2.3, revision unknown, go1.26.8"},
		{"checkout with VCS stamping", "", "", info("(devel)", rev, dirty), "rmqtopo (devel), revision abc123 (modified), go1.26.8"},
		{"make build, -buildvcs=false", "v1.2.3-4-gdef456", "def456", info("(devel)"), "rmqtopo v1.2.3-4-gdef456, revision def456, go1.26.8"},
		{"make build with VCS stamping", "v1.2.3", "def456", info("(devel)", rev), "rmqtopo v1.2.3, revision abc123, go1.26.8"},
		{"no build information", "", "", func() (*debug.BuildInfo, bool) { return nil, false }, "rmqtopo (devel), revision unknown"},
	} {
		if got := String(c.stampV, c.stampR, c.read); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
