package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/rmqtopo/rmqtopo/internal/brokertest"
)

// TestMain serves two harnesses at once:
//
//   - testscript re-executes this test binary as the "rmqtopo" command of
//     the scripts in testdata/script; that run is the real CLI and exits
//     through exitCode, exactly like main.
//   - brokertest owns the private RabbitMQ node of the online tests. It is
//     only started when a test calls brokertest.Get, so offline scripts and
//     tests never wait for a broker, and it is cleaned up after m.Run.
//
// testscript.Main calls Run() on what it is given and exits with its result,
// so brokerM routes that through brokertest.Run instead of m.Run directly.
func TestMain(m *testing.M) {
	testscript.Main(brokerM{m}, map[string]func(){
		"rmqtopo": func() {
			os.Exit(exitCode(runMain(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr), os.Stderr))
		},
	})
}

// brokerM is a testscript.TestingM whose Run also manages brokertest's node.
type brokerM struct{ m *testing.M }

func (b brokerM) Run() int {
	code := brokertest.Run(b.m)
	if binPath != "" {
		// buildCLI's binary, 17 MB, would outlive every run in /tmp.
		os.RemoveAll(filepath.Dir(binPath))
	}
	return code
}

// TestScripts runs the CLI scripts in testdata/script. They are offline:
// validate, render, help and usage errors, with no broker.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:           "testdata/script",
		UpdateScripts: os.Getenv("RMQTOPO_UPDATE_SCRIPTS") != "",
		Cmds:          map[string]func(ts *testscript.TestScript, neg bool, args []string){"exits": scriptExits},
	})
}
