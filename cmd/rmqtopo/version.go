package main

import (
	"fmt"
	"runtime/debug"

	"github.com/alecthomas/kong"

	"github.com/rmqtopo/rmqtopo/internal/buildinfo"
)

// version and revision are stamped by the Makefile with -ldflags "-X
// main.version=... -X main.revision=...": builds with -buildvcs=false (or
// from a tarball) carry no VCS information of their own.
var (
	version  string
	revision string
)

// versionFlag prints buildinfo.String and exits 0, like --help.
type versionFlag bool

// BeforeReset runs before anything is required, so `rmqtopo --version`
// needs no command.
func (versionFlag) BeforeReset(app *kong.Kong) error {
	fmt.Fprintln(app.Stdout, buildinfo.String(version, revision, debug.ReadBuildInfo))
	app.Exit(0)
	return nil
}
