package broker

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
)

// Dynamic shovels (the rabbitmq_shovel plugin, which ships with RabbitMQ):
// a shovel is a runtime parameter of a vhost, run by the broker that holds
// it, so it moves messages whether or not the process that declared it
// still runs. rmqtopo's blue-green move declares them on the green broker
// (4.0 or later: src-predeclared, which makes the shovel check its source
// queue passively instead of declaring it, is in the shovel of 4.0.5 but
// not in 3.10's; rabbit_shovel_parameters).

// Shovel is a dynamic shovel from a queue of one broker to a queue of
// another, acknowledging each message at its source only once the
// destination confirmed it (ack-mode on-confirm), and adding no header
// (no forward headers, no timestamp): the message arrives as it was.
type Shovel struct {
	Vhost, Name string
	// SrcURI and DestURI are AMQP URIs with credentials and the vhost in
	// their path, as the broker that runs the shovel reaches them.
	SrcURI, SrcQueue   string
	DestURI, DestQueue string
	// Prefetch is the source's prefetch count: the most messages in
	// flight, unconfirmed (RabbitMQ's default is 1000).
	Prefetch int
}

// PutShovel declares s, or redeclares it as it is (idempotent: the
// broker keeps one shovel per name and restarts it with the new value).
func (c *Client) PutShovel(ctx context.Context, s Shovel) error {
	value := map[string]any{
		"src-protocol": "amqp091", "src-uri": s.SrcURI, "src-queue": s.SrcQueue, "src-predeclared": true,
		"dest-protocol": "amqp091", "dest-uri": s.DestURI, "dest-queue": s.DestQueue, "dest-predeclared": true,
		"ack-mode": "on-confirm", "src-delete-after": "never", "reconnect-delay": 1,
	}
	if s.Prefetch > 0 {
		value["src-prefetch-count"] = s.Prefetch
	}
	path := "/api/parameters/shovel/" + esc(s.Vhost) + "/" + esc(s.Name)
	err := c.do(ctx, http.MethodPut, path, nil, map[string]any{"value": value}, nil)
	if err != nil {
		return fmt.Errorf("declare shovel %q in vhost %q (is the rabbitmq_shovel plugin enabled?): %w", s.Name, s.Vhost, err)
	}
	return nil
}

// DeleteShovel deletes the shovel name of vhost; one that is gone is not
// an error. Messages it had taken but not yet seen confirmed go back to
// its source queue (their channel closes), so a delete loses none.
func (c *Client) DeleteShovel(ctx context.Context, vhost, name string) error {
	path := "/api/parameters/shovel/" + esc(vhost) + "/" + esc(name)
	if err := ignoreNotFound(c.do(ctx, http.MethodDelete, path, nil, nil, nil)); err != nil {
		return fmt.Errorf("delete shovel %q in vhost %q: %w", name, vhost, err)
	}
	return nil
}

// ShovelNames returns the names of the dynamic shovels declared in
// vhost (its shovel runtime parameters: the core management API answers
// it, without the rabbitmq_shovel_management plugin).
func (c *Client) ShovelNames(ctx context.Context, vhost string) (map[string]bool, error) {
	var items []struct {
		Name string `json:"name"`
	}
	err := c.do(ctx, http.MethodGet, "/api/parameters/shovel/"+esc(vhost), nil, nil, &items)
	if err != nil {
		return nil, fmt.Errorf("read the shovels of vhost %q (is the rabbitmq_shovel plugin enabled?): %w", vhost, err)
	}
	out := make(map[string]bool, len(items))
	for _, it := range items {
		out[it.Name] = true
	}
	return out, nil
}

// VhostURI is the AMQP URL of the client (Client.AMQPURL), with its
// credentials, for vhost: what a shovel connects with.
func (c *Client) VhostURI(ctx context.Context, vhost string) (string, error) {
	raw, err := c.AMQPURL(ctx)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("AMQP URL: %w", err)
	}
	u.Path = "/" + vhost
	u.RawPath = "/" + url.PathEscape(vhost)
	return u.String(), nil
}
