package main

import (
	"errors"
	"fmt"

	"github.com/rmqtopo/rmqtopo/internal/english"
	"github.com/rmqtopo/rmqtopo/internal/exitcode"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

type validateCmd struct {
	Files []string `arg:"" name:"FILE" help:"Spec files (one vhost each)."`
}

// Run checks each file on its own, so a directory of specs for different
// environments (all for vhost "/") validates in one call.
func (c *validateCmd) Run(e *env) error {
	var files []*spec.File
	var all spec.Errors
	for _, path := range c.Files {
		fs, err := spec.LoadFilesLimit(e.maxSpecSize, path)
		var es spec.Errors
		switch {
		case errors.As(err, &es):
			all = append(all, es...)
		case err != nil:
			return input(err)
		default:
			files = append(files, fs...)
		}
	}
	if err := reportProblems(e, all); err != nil {
		return err
	}
	for _, f := range files {
		fmt.Fprintf(e.stdout, "%s: ok (vhost %q, %s)\n", f.Path, f.Spec.Vhost, english.Count(len(f.Spec.Queues), "queue", "queues"))
	}
	return nil
}

// loadSpecs loads files and, on problems, prints every one of them to
// stderr and returns an error that only sets the exit code.
func loadSpecs(e *env, paths []string) ([]*spec.File, error) {
	files, err := spec.LoadFilesLimit(e.maxSpecSize, paths...)
	return files, loadError(e, err)
}

// loadExpanded is loadSpecs and spec.Expand in one, expanding each spec
// once (see spec.LoadExpanded).
func loadExpanded(e *env, paths []string) ([]*spec.File, topology.Topology, error) {
	files, t, err := spec.LoadExpanded(e.maxSpecSize, paths...)
	return files, t, loadError(e, err)
}

// loadError reports a load's problems (reportProblems); any other error
// is the input's.
func loadError(e *env, err error) error {
	var es spec.Errors
	if errors.As(err, &es) {
		return reportProblems(e, es)
	}
	return input(err)
}

// reportProblems prints every problem to stderr; the returned error only
// sets the exit code and a summary line.
func reportProblems(e *env, es spec.Errors) error {
	if len(es) > 0 {
		for _, p := range es {
			fmt.Fprintln(e.stderr, p.Error())
		}
		noun := "problems"
		if len(es) == 1 {
			noun = "problem"
		}
		return &ExitError{Code: exitcode.Failure, Err: fmt.Errorf("%d %s found; nothing was sent to the broker", len(es), noun)}
	}
	return nil
}
