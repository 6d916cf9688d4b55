package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/alecthomas/kong"
)

// version and revision are stamped by the Makefile with -ldflags "-X
// main.version=... -X main.revision=...": builds with -buildvcs=false (or
// from a tarball) carry no VCS information of their own.
var (
	version  string
	revision string
)

// versionFlag prints versionString and exits 0, like --help.
type versionFlag bool

// BeforeReset runs before anything is required, so `rmqtopo --version`
// needs no command.
func (versionFlag) BeforeReset(app *kong.Kong) error {
	fmt.Fprintln(app.Stdout, versionString(debug.ReadBuildInfo))
	app.Exit(0)
	return nil
}

// versionString says which rmqtopo this is: the module version (a tag
// under `go install ...@vX`, "(devel)" for a build from a checkout), the
// VCS revision and whether the tree was modified, and the Go version.
// Build information wins where it has a value; -ldflags fill the gaps.
func versionString(read func() (*debug.BuildInfo, bool)) string {
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
