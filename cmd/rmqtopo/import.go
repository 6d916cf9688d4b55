package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/rmqtopo/rmqtopo/internal/definitions"
	"github.com/rmqtopo/rmqtopo/internal/importer"
	"github.com/rmqtopo/rmqtopo/topology"
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
	in := importer.Input{Vhost: c.Vhost}
	if c.Definitions != "" {
		if err := c.fromFile(&in); err != nil {
			return fmt.Errorf("import: %w", err)
		}
	} else {
		client, err := c.Conn.client(e)
		if err != nil {
			return err
		}
		st, err := client.Read(e.ctx, []string{c.Vhost})
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		if len(st.Topology.Vhosts) == 0 {
			return fmt.Errorf("import: vhost %q does not exist on %s", c.Vhost, client.URL())
		}
		data, err := client.ExportVhost(e.ctx, c.Vhost)
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		if in.Skipped, err = importer.Extras(data, c.Vhost); err != nil {
			return fmt.Errorf("import: %w", err)
		}
		in.Topology, in.Source = st.Topology, "the broker at "+client.URL()
		if v, err := client.Version(e.ctx); err == nil {
			in.Source += " (RabbitMQ " + v.String() + ")"
		}
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
		return fmt.Errorf("import: %w", err)
	}
	fmt.Fprintf(e.stderr, "Wrote %s: %d queues with retry topology recognised, %d objects not imported.\n", c.Out, res.Recognised, len(res.Skipped))
	return nil
}

func (c *importCmd) fromFile(in *importer.Input) error {
	data, err := os.ReadFile(c.Definitions)
	if err != nil {
		return err
	}
	doc, err := definitions.Decode(data, c.Vhost)
	if err != nil {
		return fmt.Errorf("%s: %w", c.Definitions, err)
	}
	in.Topology = definitions.Clean(doc.ToTopology(c.Vhost))
	if len(doc.Vhosts) > 0 && !contains(in.Topology.Vhosts, c.Vhost) {
		return fmt.Errorf("%s has no vhost %q", c.Definitions, c.Vhost)
	}
	if in.Skipped, err = importer.Extras(data, c.Vhost); err != nil {
		return fmt.Errorf("%s: %w", c.Definitions, err)
	}
	in.Source = "the definitions file " + filepath.Base(c.Definitions)
	if v, err := topology.ParseVersion(doc.RabbitVersion); err == nil {
		in.Source += " (RabbitMQ " + v.String() + ")"
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
