package broker

import (
	"context"
	"net/http"
	"net/url"

	"github.com/rmqtopo/rmqtopo/internal/definitions"
	"github.com/rmqtopo/rmqtopo/internal/english"
	"github.com/rmqtopo/rmqtopo/topology"
)

// The write methods below are the management API's side of target.Target.
// Each is idempotent: creating what exists identically succeeds, deleting
// what is gone succeeds. Errors are *Error without context; the caller
// names the object.

// PutVhost creates vhost; an existing vhost is left as it is. The
// management API grants the creating user full permissions in it.
func (c *Client) PutVhost(ctx context.Context, vhost string) error {
	return c.do(ctx, http.MethodPut, "/api/vhosts/"+esc(vhost), nil, map[string]any{"description": "managed by rmqtopo"}, nil)
}

// DeclareExchange declares e over HTTP.
func (c *Client) DeclareExchange(ctx context.Context, e topology.Exchange) error {
	return c.do(ctx, http.MethodPut, "/api/exchanges/"+esc(e.Vhost)+"/"+esc(e.Name), nil, map[string]any{
		"type": e.Type, "durable": e.Durable, "auto_delete": e.AutoDelete, "internal": e.Internal, "arguments": nonNil(e.Arguments),
	}, nil)
}

// DeclareQueue declares q over HTTP.
func (c *Client) DeclareQueue(ctx context.Context, q topology.Queue) error {
	return c.do(ctx, http.MethodPut, "/api/queues/"+esc(q.Vhost)+"/"+esc(q.Name), nil, map[string]any{
		"durable": q.Durable, "auto_delete": q.AutoDelete, "arguments": nonNil(definitions.DeclareArgs(q)),
	}, nil)
}

func bindingPath(b topology.Binding) string {
	d := "q"
	if b.DestinationType == topology.DestExchange {
		d = "e"
	}
	return "/api/bindings/" + esc(b.Vhost) + "/e/" + esc(b.Source) + "/" + d + "/" + esc(b.Destination)
}

// Bind creates b over HTTP; bindings are a set, so binding twice is one
// binding.
func (c *Client) Bind(ctx context.Context, b topology.Binding) error {
	return c.do(ctx, http.MethodPost, bindingPath(b), nil, map[string]any{
		"routing_key": b.RoutingKey, "arguments": nonNil(b.Arguments),
	}, nil)
}

// Unbind deletes b over HTTP. The API addresses a binding by a properties
// key the broker derives from a hash of its arguments, so the bindings
// between the two endpoints are listed (one call) to find it.
func (c *Client) Unbind(ctx context.Context, b topology.Binding) error {
	var list []struct {
		RoutingKey    string         `json:"routing_key"`
		Arguments     map[string]any `json:"arguments"`
		PropertiesKey string         `json:"properties_key"`
	}
	if err := c.do(ctx, http.MethodGet, bindingPath(b), nil, nil, &list); err != nil {
		return ignoreNotFound(err)
	}
	want := b.Addr()
	for _, l := range list {
		got := topology.Binding{Vhost: b.Vhost, Source: b.Source, Destination: b.Destination, DestinationType: b.DestinationType,
			RoutingKey: l.RoutingKey, Arguments: topology.NormalizeArgs(l.Arguments)}
		if got.Addr() == want {
			return ignoreNotFound(c.do(ctx, http.MethodDelete, bindingPath(b)+"/"+esc(l.PropertiesKey), nil, nil, nil))
		}
	}
	return nil
}

// PutPolicy creates or updates p.
func (c *Client) PutPolicy(ctx context.Context, p topology.Policy) error {
	return c.do(ctx, http.MethodPut, "/api/policies/"+esc(p.Vhost)+"/"+esc(p.Name), nil, map[string]any{
		"pattern": p.Pattern, "apply-to": p.ApplyTo, "priority": p.Priority, "definition": nonNil(p.Definition),
	}, nil)
}

// DeletePolicy deletes a policy; a missing one is success.
func (c *Client) DeletePolicy(ctx context.Context, vhost, name string) error {
	return ignoreNotFound(c.do(ctx, http.MethodDelete, "/api/policies/"+esc(vhost)+"/"+esc(name), nil, nil, nil))
}

// DeleteExchange deletes an exchange and its bindings; a missing one is
// success.
func (c *Client) DeleteExchange(ctx context.Context, vhost, name string) error {
	return ignoreNotFound(c.do(ctx, http.MethodDelete, "/api/exchanges/"+esc(vhost)+"/"+esc(name), nil, nil, nil))
}

// DeleteQueue deletes q over HTTP; a missing queue is success. With
// ifEmpty a classic queue holding messages is kept and the error is
// ErrNotEmpty. Quorum queues refuse if-empty on 3.x, so for them the
// broker's statistics (a few seconds old) are checked first; Session's
// AMQP delete counts exactly instead.
func (c *Client) DeleteQueue(ctx context.Context, q topology.Queue, ifEmpty bool) error {
	path := "/api/queues/" + esc(q.Vhost) + "/" + esc(q.Name)
	if !ifEmpty {
		return ignoreNotFound(c.do(ctx, http.MethodDelete, path, nil, nil, nil))
	}
	if q.QueueType() == "classic" {
		return ignoreNotFound(c.do(ctx, http.MethodDelete, path, url.Values{"if-empty": {"true"}}, nil, nil))
	}
	counts, err := c.QueueCounts(ctx, q.Vhost, []string{q.Name})
	if err != nil {
		return err
	}
	if n := counts[q.Name].Messages; n > 0 {
		return &Error{Kind: ErrNotEmpty, Msg: "queue holds " + english.Count(n, "message", "messages")}
	}
	return ignoreNotFound(c.do(ctx, http.MethodDelete, path, nil, nil, nil))
}

func nonNil(a topology.Args) map[string]any {
	if a == nil {
		return map[string]any{}
	}
	return a
}
