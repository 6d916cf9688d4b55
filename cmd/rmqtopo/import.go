package main

import (
	"fmt"
	"os"

	"github.com/rmqtopo/rmqtopo/internal/importer"
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
	if c.Out == "" {
		_, err = e.stdout.Write(res.YAML)
		return err
	}
	if err := os.WriteFile(c.Out, res.YAML, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "Wrote %s: %d queues with retry topology recognised, %d objects not imported.\n", c.Out, res.Recognised, len(res.Skipped))
	return nil
}
