package main

import (
	"errors"
	"fmt"

	"github.com/rmqtopo/rmqtopo/render"
	"github.com/rmqtopo/rmqtopo/spec"
)

type validateCmd struct {
	Files []string `arg:"" name:"FILE" help:"Spec files (one vhost each)." type:"path"`
}

func (c *validateCmd) Run(e *env) error {
	files, err := loadSpecs(e, c.Files)
	if err != nil {
		return err
	}
	for _, f := range files {
		fmt.Fprintf(e.stdout, "%s: ok (vhost %q, %d queues)\n", f.Path, f.Spec.Vhost, len(f.Spec.Queues))
	}
	return nil
}

// loadSpecs loads files and, on problems, prints every one of them to
// stderr and returns an error that only sets the exit code.
func loadSpecs(e *env, paths []string) ([]*spec.File, error) {
	files, err := spec.LoadFiles(paths...)
	var es spec.Errors
	if errors.As(err, &es) {
		for _, p := range es {
			fmt.Fprintln(e.stderr, p.Error())
		}
		noun := "problems"
		if len(es) == 1 {
			noun = "problem"
		}
		return nil, &ExitError{Code: 1, Err: fmt.Errorf("%d %s found; nothing was sent to the broker", len(es), noun)}
	}
	return files, err
}

type renderCmd struct {
	Files  []string `arg:"" name:"FILE" help:"Spec files (one vhost each)." type:"path"`
	Format string   `short:"f" help:"Output format: definitions (RabbitMQ definitions JSON), mermaid, dot or schedule." enum:"definitions,mermaid,dot,schedule" default:"schedule"`
}

func (c *renderCmd) Run(e *env) error {
	files, err := loadSpecs(e, c.Files)
	if err != nil {
		return err
	}
	switch c.Format {
	case "schedule":
		return render.Schedule(e.stdout, files, e.color)
	case "definitions":
		return render.Definitions(e.stdout, spec.Expand(files...))
	case "mermaid":
		return render.Mermaid(e.stdout, spec.Expand(files...))
	case "dot":
		return render.Dot(e.stdout, spec.Expand(files...))
	}
	return fmt.Errorf("unknown format %q", c.Format)
}
