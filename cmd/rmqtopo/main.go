// Command rmqtopo provisions RabbitMQ retry topologies (TTL wait queues,
// dead-letter exchanges and DLQs) from a declarative YAML spec.
//
// main is a thin shell over run, so tests drive the whole CLI in-process.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := exitCode(runMain(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr), os.Stderr)
	stop()
	os.Exit(code)
}

// ExitError carries a specific exit code, such as 2 for
// `plan --detailed-exitcode` with changes. A nil Err prints nothing.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// exitCode prints err, if any, as "rmqtopo: ..." lines and returns the
// process exit code.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	code := 1
	var ee *ExitError
	if errors.As(err, &ee) {
		code = ee.Code
		if ee.Err == nil {
			return code
		}
		err = ee.Err
	}
	fmt.Fprintf(stderr, "rmqtopo: %s\n", err)
	return code
}
