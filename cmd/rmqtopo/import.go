package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/rmqtopo/rmqtopo/importer"
	"github.com/rmqtopo/rmqtopo/internal/english"
)

type importCmd struct {
	Vhost       string    `name:"vhost" help:"The vhost to import." default:"/"`
	Definitions string    `name:"definitions" placeholder:"FILE" help:"Import from a definitions export (rabbitmqctl export_definitions, GET /api/definitions[/{vhost}]) instead of a live broker; needs no credentials."`
	Out         string    `short:"o" name:"out" placeholder:"FILE" help:"Write the spec to FILE instead of stdout."`
	Conn        connFlags `embed:""`
}

// Run writes the spec of one vhost. What the spec cannot represent goes
// to stderr as well as into the spec's header, never silently away.
func (c *importCmd) Run(e *env) (err error) {
	var in importer.Input
	if c.Definitions != "" {
		in, err = importer.FromFile(c.Definitions, c.Vhost)
	} else {
		client, cerr := c.Conn.client(e)
		if cerr != nil {
			return cerr
		}
		in, err = importer.FromBroker(e.ctx, client, c.Vhost)
	}
	if err != nil {
		return err
	}
	res, err := importer.Import(in)
	if err != nil {
		return err
	}
	for _, s := range res.Skipped {
		fmt.Fprintf(e.stderr, "not imported: %s\n", s)
	}
	if res.Unrecorded {
		fmt.Fprintf(e.stderr, "note: vhost %q holds what rmqtopo applies, but the source has no ownership record (a RabbitMQ 4.3 definitions export leaves them out): the spec has no name; if a spec applied it, set name to that spec's, or import from the broker\n", c.Vhost)
	}
	if len(res.Specs) > 1 {
		fmt.Fprintf(e.stderr, "note: vhost %q holds the ownership records of %d specs (%s); the spec describes all of it and has no name: split it into one spec per name before applying it\n",
			c.Vhost, len(res.Specs), strings.Join(quoted(res.Specs), ", "))
	}
	if c.Out == "" {
		_, err = e.stdout.Write(res.YAML)
		return err
	}
	if err := os.WriteFile(c.Out, res.YAML, 0o644); err != nil {
		return err
	}
	named := ""
	if res.Name != "" {
		named = fmt.Sprintf(" (spec %q, as the vhost's ownership record names it)", res.Name)
	}
	adopted := ""
	if res.Adopted > 0 {
		adopted = fmt.Sprintf(", %s adopted (plan it: it changes the vhost, and names the queues it retires)",
			english.Count(res.Adopted, "hand-made retry scheme", "hand-made retry schemes"))
	}
	fmt.Fprintf(e.stderr, "Wrote %s%s: %s with retry topology recognised%s, %s not imported.\n", c.Out, named,
		english.Count(res.Recognised, "queue", "queues"), adopted, english.Count(len(res.Skipped), "object", "objects"))
	return nil
}

func quoted(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%q", n)
	}
	return out
}
