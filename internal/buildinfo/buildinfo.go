// Package buildinfo says which rmqtopo a binary is, for --version: from
// the Go build information and the Makefile's -ldflags stamps.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// String says which rmqtopo this is: the module version (a tag under
// `go install ...@vX`, "(devel)" for a build from a checkout), the VCS
// revision and whether the tree was modified, and the Go version. Build
// information (read, debug.ReadBuildInfo) wins where it has a value;
// version and revision, stamped by the Makefile's -ldflags, fill the gaps.
func String(version, revision string, read func() (*debug.BuildInfo, bool)) string {
	v, rev, goVersion, modified := version, revision, "", false
	if bi, ok := read(); ok {
		goVersion = bi.GoVersion
		if m := bi.Main.Version; m != "" && m != "(devel)" || v == "" {
			v = m
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	parts := []string{"rmqtopo " + v}
	switch {
	case rev == "":
		parts = append(parts, "revision unknown")
	case modified:
		parts = append(parts, "revision "+rev+" (modified)")
	default:
		parts = append(parts, "revision "+rev)
	}
	if goVersion != "" {
		parts = append(parts, goVersion)
	}
	return strings.Join(parts, ", ")
}
