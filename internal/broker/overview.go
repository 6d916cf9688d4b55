package broker

import (
	"context"
	"fmt"
	"net/http"

	"github.com/rmqtopo/rmqtopo/topology"
)

// Version is the broker's RabbitMQ version, as Server reads it (once per
// client, from /api/overview, which a user tagged monitoring may read):
// the one version getter.
func (c *Client) Version(ctx context.Context) (topology.Version, error) {
	raw, err := c.Server(ctx)
	if err != nil {
		return topology.Version{}, err
	}
	v, err := topology.ParseVersion(raw)
	if err != nil {
		return topology.Version{}, fmt.Errorf("read overview: %w", err)
	}
	return v, nil
}

// ExportVhost returns the raw definitions export of one vhost (GET
// /api/definitions/{vhost}), for what a topology.Topology leaves out; see
// ReadVhost for the topology itself.
func (c *Client) ExportVhost(ctx context.Context, vhost string) ([]byte, error) {
	var data []byte
	if err := c.do(ctx, http.MethodGet, "/api/definitions/"+esc(vhost), nil, nil, &data); err != nil {
		return nil, fmt.Errorf("export vhost %q: %w", vhost, err)
	}
	return data, nil
}
