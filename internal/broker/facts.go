package broker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/rmqtopo/rmqtopo/topology"
)

// Facts reads what the broker says of itself that the key table's
// verdicts depend on (topology.Facts): its version, each deprecated
// feature's phase (GET /api/deprecated-features, 3.13+) and the plugins
// enabled on every running node (GET /api/nodes, their running
// applications). What the broker does not have (3.x before 3.13) or the
// user may not read is left unknown, never an error: the plan then judges
// by the table's defaults and says so.
func (c *Client) Facts(ctx context.Context) (topology.Facts, error) {
	v, err := c.Version(ctx)
	if err != nil {
		return topology.Facts{}, err
	}
	x := topology.Facts{Version: v}
	if x.Deprecated, err = c.deprecatedFeatures(ctx); err != nil {
		return topology.Facts{}, err
	}
	if x.Plugins, err = c.enabledPlugins(ctx); err != nil {
		return topology.Facts{}, err
	}
	return x, nil
}

// unknownFact reports an answer that leaves a fact unknown rather than
// failing a read: a missing endpoint (3.10 answers 406 to one it does not
// have) or a tag the user lacks.
func unknownFact(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrPermission) || errors.Is(err, ErrRefused)
}

func (c *Client) deprecatedFeatures(ctx context.Context) (map[string]string, error) {
	var list []struct {
		Name  string `json:"name"`
		Phase string `json:"deprecation_phase"`
	}
	err := c.do(ctx, http.MethodGet, "/api/deprecated-features", nil, nil, &list)
	switch {
	case unknownFact(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read deprecated features: %w", err)
	}
	out := make(map[string]string, len(list))
	for _, f := range list {
		out[f.Name] = f.Phase
	}
	return out, nil
}

// enabledPlugins are the rabbitmq_* applications every running node runs:
// a plugin's policy keys are validated on the node that takes the write.
func (c *Client) enabledPlugins(ctx context.Context) (map[string]bool, error) {
	var nodes []struct {
		Running      bool `json:"running"`
		Applications []struct {
			Name string `json:"name"`
		} `json:"applications"`
	}
	err := c.do(ctx, http.MethodGet, "/api/nodes", url.Values{"columns": {"running,applications"}}, nil, &nodes)
	switch {
	case unknownFact(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read nodes: %w", err)
	}
	var out map[string]bool
	for _, n := range nodes {
		if !n.Running {
			continue
		}
		here := map[string]bool{}
		for _, a := range n.Applications {
			if strings.HasPrefix(a.Name, "rabbitmq_") {
				here[a.Name] = true
			}
		}
		if out == nil {
			out = here
			continue
		}
		for p := range out {
			if !here[p] {
				delete(out, p)
			}
		}
	}
	return out, nil
}
