package broker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/rmqtopo/rmqtopo/topology"
)

// Access reads the user's tags (GET /api/whoami, open to every user) and,
// when the user may read them (administrators), its permissions in each
// of vhosts, so that apply can refuse before its first write what the
// broker would refuse half-way.
func (c *Client) Access(ctx context.Context, vhosts []string) (topology.Access, error) {
	var who struct {
		Name string `json:"name"`
		Tags any    `json:"tags"`
	}
	if err := c.do(ctx, http.MethodGet, "/api/whoami", nil, nil, &who); err != nil {
		return topology.Access{}, fmt.Errorf("read the user's tags: %w", err)
	}
	a := topology.Access{User: who.Name, Tags: tagList(who.Tags), Permissions: map[string]topology.Permission{}}
	for _, v := range vhosts {
		var p struct {
			Configure string `json:"configure"`
			Write     string `json:"write"`
			Read      string `json:"read"`
		}
		err := c.do(ctx, http.MethodGet, "/api/permissions/"+esc(v)+"/"+esc(who.Name), nil, nil, &p)
		switch {
		case errors.Is(err, ErrPermission):
			a.Permissions = nil // not the user's to see: unknown
			return a, nil
		case errors.Is(err, ErrNotFound), errors.Is(err, ErrVhostNotFound):
			continue // none in this vhost
		case err != nil:
			return topology.Access{}, fmt.Errorf("read the permissions of user %q in vhost %q: %w", who.Name, v, err)
		}
		a.Permissions[v] = topology.Permission{Configure: p.Configure, Write: p.Write, Read: p.Read}
	}
	return a, nil
}

// tagList reads tags, a list on 3.9 and later, a comma-separated string
// before.
func tagList(v any) []string {
	var out []string
	switch t := v.(type) {
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	case string:
		for _, s := range strings.Split(t, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}
