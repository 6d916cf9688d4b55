package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/alecthomas/kong"
	"golang.org/x/term"

	"github.com/rmqtopo/rmqtopo/internal/exitcode"
	"github.com/rmqtopo/rmqtopo/internal/memlimit"
)

// cli is the command tree. Each command lives in the file of its name
// (validate.go, render.go, plan.go, apply.go, show.go, status.go, dlq.go,
// move.go, import.go, upgrade.go); conn.go holds the flags that reach a broker.
type cli struct {
	Validate validateCmd `cmd:"" help:"Check spec files and report every problem at once."`
	Render   renderCmd   `cmd:"" help:"Render spec files offline: definitions, mermaid, dot, schedule, k8s or terraform."`
	Plan     planCmd     `cmd:"" help:"Show the changes that would make the broker match the spec."`
	Apply    applyCmd    `cmd:"" help:"Make the broker match the spec, or apply a saved plan."`
	Show     showCmd     `cmd:"" help:"Show a plan saved with 'plan --out' as text, JSON or Markdown."`
	Status   statusCmd   `cmd:"" help:"Show queue, wait-queue, DLQ and parking-lot depths for specs."`
	DLQ      dlqCmd      `cmd:"" name:"dlq" help:"Inspect, replay and sweep dead-letter queues."`
	Move     moveCmd     `cmd:"" help:"Move a queue's messages, headers and all, into another queue (a renamed queue's)."`
	Import   importCmd   `cmd:"" help:"Write a spec for what already exists in one vhost of a broker or definitions file."`
	Upgrade  upgradeCmd  `cmd:"" help:"Move to another RabbitMQ release: preview what it changes, then move the specs' messages blue-green."`

	Version     versionFlag `help:"Print the version and VCS revision, then exit."`
	Color       string      `help:"Colour output: auto (on a TTY, unless NO_COLOR is set), always or never." enum:"auto,always,never" default:"auto"`
	MaxSpecSize string      `name:"max-spec-size" placeholder:"SIZE" help:"Refuse spec files larger than this (e.g. 4MiB, 512KiB, 1000000)." default:"4MiB"`
	MemoryLimit string      `name:"memory-limit" placeholder:"SIZE" help:"Soft limit on memory: near it rmqtopo collects garbage more often, trading CPU for memory; a plan that needs more goes over it, more slowly. Default: GOMEMLIMIT when set, else 450MiB; off for none."`
}

// env is what every command runs with, bound by kong.
type env struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	color  bool
	// getenv reads the environment; tests replace it.
	getenv func(string) string
	// maxSpecSize bounds a spec file, in bytes (--max-spec-size).
	maxSpecSize int64
	// secrets give the strings (passwords, URLs with credentials) of the
	// connections the command opened: run scrubs them from its error.
	secrets []func() []string
}

// hide has run scrub the strings secrets gives (when the command ends)
// from the command's error.
func (e *env) hide(secrets func() []string) { e.secrets = append(e.secrets, secrets) }

type kongExit struct{ code int }

// run parses args and runs one command. It never calls os.Exit, and it
// leaves process-wide settings alone (tests call it many times in one
// process): --memory-limit is checked, but only runMain applies it.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return execute(ctx, args, stdin, stdout, stderr, false)
}

// runMain is run for a whole process, as main calls it: it also applies
// --memory-limit to the Go runtime.
func runMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return execute(ctx, args, stdin, stdout, stderr, true)
}

func execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, process bool) (err error) {
	var c cli
	parser, err := kong.New(&c,
		kong.Name("rmqtopo"),
		kong.Description("Declarative retry topologies for RabbitMQ: delayed retries with backoff, dead-lettering and DLQs."),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { panic(kongExit{code}) }),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
	)
	if err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			k, ok := r.(kongExit)
			if !ok {
				panic(r)
			}
			if k.code != 0 {
				err = &ExitError{Code: k.code}
			}
		}
	}()
	kctx, err := parser.Parse(args)
	if err != nil {
		var pe *kong.ParseError
		if errors.As(err, &pe) {
			return &ExitError{Code: exitcode.Failure, Err: fmt.Errorf("%s (see \"rmqtopo --help\")", pe.Error())}
		}
		return err
	}
	size, err := memlimit.ParseSize(c.MaxSpecSize)
	if err != nil {
		return &ExitError{Code: exitcode.Failure, Err: fmt.Errorf("--max-spec-size: %w", err)}
	}
	if _, _, _, err := memlimit.Parse(c.MemoryLimit, os.Getenv); err != nil {
		return &ExitError{Code: exitcode.Failure, Err: fmt.Errorf("--memory-limit: %w", err)}
	}
	if process {
		// Process-wide, and for as long as the process lives: nothing to
		// restore.
		if _, err := memlimit.Set(c.MemoryLimit, os.Getenv); err != nil {
			return &ExitError{Code: exitcode.Failure, Err: fmt.Errorf("--memory-limit: %w", err)}
		}
	}
	e := &env{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv, maxSpecSize: size}
	e.color = wantColor(c.Color, stdout, e.getenv)
	err = named(kctx.Selected().Path(), flagWords(kctx.Run(e)))
	for _, s := range e.secrets {
		err = scrub(err, s())
	}
	return err
}

// inputError is an error in what a command was given (a flag, a spec
// file, a URL): it says all it means without the command's name.
type inputError struct{ error }

func (e inputError) Unwrap() error { return e.error }

// input marks err, if any, as an inputError.
func input(err error) error {
	if err == nil {
		return nil
	}
	return inputError{err}
}

// named prefixes the error of command cmd ("dlq sweep") with its name,
// once for every command: not an ExitError or an inputError, which say
// all they mean. Libraries never name the command.
func named(cmd string, err error) error {
	var ee *ExitError
	var in inputError
	if err == nil || errors.As(err, &ee) || errors.As(err, &in) {
		return err
	}
	return fmt.Errorf("%s: %w", cmd, err)
}

// wantColor honours --color, NO_COLOR (any non-empty value) and whether
// stdout is a terminal.
func wantColor(mode string, w io.Writer, getenv func(string) string) bool {
	switch mode {
	case "always":
		return true
	case "never":
		return false
	}
	if getenv("NO_COLOR") != "" {
		return false
	}
	return isTerminal(w)
}

// isTerminal reports whether v (stdin, stdout or stderr) is a terminal.
// /dev/null is a character device but not a terminal, so a file mode check
// is not enough: a pipeline's `apply </dev/null` must not prompt.
func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// scrub removes secrets from an error's text, as a last line of defence:
// messages are built without credentials, but errors of other libraries
// may quote a URL.
func scrub(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := msg
	for _, s := range secrets {
		if s != "" {
			clean = strings.ReplaceAll(clean, s, "xxxxx")
		}
	}
	if clean == msg {
		return err
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return &ExitError{Code: ee.Code, Err: errors.New(clean)}
	}
	return errors.New(clean)
}
