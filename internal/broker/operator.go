package broker

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/rmqtopo/rmqtopo/internal/definitions"
	"github.com/rmqtopo/rmqtopo/topology"
)

// OperatorPolicies reads vhost's operator policies, which cap the numeric
// limits of the queues they match whatever the user policies say, so that
// a plan can state effective values. They are not in a definitions export.
// A user who may not read them (or a vhost that does not exist) gets none:
// the plan then says nothing about caps, which is what it said before.
func (c *Client) OperatorPolicies(ctx context.Context, vhost string) ([]topology.Policy, error) {
	var ps []definitions.Policy
	err := c.do(ctx, http.MethodGet, "/api/operator-policies/"+esc(vhost), nil, nil, &ps)
	switch {
	case errors.Is(err, ErrPermission), errors.Is(err, ErrNotFound), errors.Is(err, ErrVhostNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read operator policies of vhost %q: %w", vhost, err)
	}
	out := make([]topology.Policy, 0, len(ps))
	for _, p := range ps {
		applyTo := p.ApplyTo
		if applyTo == "" {
			applyTo = "queues"
		}
		out = append(out, topology.Policy{Vhost: vhost, Name: p.Name, Pattern: p.Pattern, ApplyTo: applyTo,
			Priority: p.Priority, Definition: topology.NormalizeArgs(p.Definition)})
	}
	return out, nil
}
