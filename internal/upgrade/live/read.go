// Package live reads what the upgrade preview judges from a live broker's
// management API into an upgrade.Snapshot; judging and rendering happen
// in internal/upgrade, which never talks to the broker.
package live

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/internal/upgrade"
)

// Read reads one vhost: its queues, policies, operator policies,
// exchanges, channels and consumers, and the broker's version, feature
// flags and deprecated features in use.
func Read(ctx context.Context, c *broker.Client, vhost string) (upgrade.Snapshot, error) {
	s := upgrade.Snapshot{Vhost: vhost}
	v, err := c.Version(ctx)
	if err != nil {
		return s, fmt.Errorf("reading the broker's version: %w", err)
	}
	s.Version = v
	ve := url.PathEscape(vhost)
	steps := []func() error{
		func() error { return readQueues(ctx, c, ve, &s) },
		func() error { return readPolicies(ctx, c, "/api/policies/"+ve, false, &s) },
		func() error { return readPolicies(ctx, c, "/api/operator-policies/"+ve, true, &s) },
		func() error { return readExchanges(ctx, c, ve, &s) },
		func() error { return readBindings(ctx, c, ve, &s) },
		func() error { return readChannels(ctx, c, ve, &s) },
		func() error { return readConsumers(ctx, c, ve, &s) },
		func() error { return readDeprecated(ctx, c, &s) },
		func() error { return readKhepri(ctx, c, &s) },
		func() error {
			var err error
			s.ExchangeTypes, err = readExchangeTypes(ctx, c)
			return err
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return s, err
		}
	}
	return s, nil
}

func get(ctx context.Context, c *broker.Client, path string, dst any) error {
	if err := c.GetJSON(ctx, path, nil, dst); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	return nil
}

func readQueues(ctx context.Context, c *broker.Client, ve string, s *upgrade.Snapshot) error {
	var qs []struct {
		Name       string         `json:"name"`
		Type       string         `json:"type"`
		Durable    bool           `json:"durable"`
		Exclusive  bool           `json:"exclusive"`
		AutoDelete bool           `json:"auto_delete"`
		Arguments  map[string]any `json:"arguments"`
		Effective  map[string]any `json:"effective_policy_definition"`
		Policy     any            `json:"policy"`
	}
	if err := get(ctx, c, "/api/queues/"+ve, &qs); err != nil {
		return err
	}
	for _, q := range qs {
		p, _ := q.Policy.(string)
		s.Queues = append(s.Queues, upgrade.Queue{Name: q.Name, Type: q.Type, Durable: q.Durable, Exclusive: q.Exclusive,
			AutoDelete: q.AutoDelete, Arguments: q.Arguments, Effective: q.Effective, Policy: p})
	}
	return nil
}

func readPolicies(ctx context.Context, c *broker.Client, path string, operator bool, s *upgrade.Snapshot) error {
	var ps []struct {
		Name       string         `json:"name"`
		Pattern    string         `json:"pattern"`
		ApplyTo    string         `json:"apply-to"`
		Priority   int            `json:"priority"`
		Definition map[string]any `json:"definition"`
	}
	if err := get(ctx, c, path, &ps); err != nil {
		return err
	}
	for _, p := range ps {
		s.Policies = append(s.Policies, upgrade.Policy{Name: p.Name, Pattern: p.Pattern, ApplyTo: p.ApplyTo,
			Priority: p.Priority, Definition: p.Definition, Operator: operator})
	}
	return nil
}

func readExchanges(ctx context.Context, c *broker.Client, ve string, s *upgrade.Snapshot) error {
	var xs []upgradeExchange
	if err := get(ctx, c, "/api/exchanges/"+ve, &xs); err != nil {
		return err
	}
	for _, x := range xs {
		s.Exchanges = append(s.Exchanges, upgrade.Exchange{Name: x.Name, Type: x.Type, Arguments: x.Arguments})
	}
	return nil
}

func readBindings(ctx context.Context, c *broker.Client, ve string, s *upgrade.Snapshot) error {
	var bs []struct {
		Source          string `json:"source"`
		Destination     string `json:"destination"`
		DestinationType string `json:"destination_type"`
		RoutingKey      string `json:"routing_key"`
	}
	if err := get(ctx, c, "/api/bindings/"+ve, &bs); err != nil {
		return err
	}
	for _, b := range bs {
		if b.Source != "" {
			s.Bindings = append(s.Bindings, upgrade.Binding{Source: b.Source, Destination: b.Destination,
				DestinationType: b.DestinationType, RoutingKey: b.RoutingKey})
		}
	}
	return nil
}

type upgradeExchange struct {
	Name      string         `json:"name"`
	Type      string         `json:"type"`
	Arguments map[string]any `json:"arguments"`
}

// ReadGreen reads what the preview judges of a live target broker: its
// version and the exchange types it has enabled.
func ReadGreen(ctx context.Context, c *broker.Client) (upgrade.Green, error) {
	v, err := c.Version(ctx)
	if err != nil {
		return upgrade.Green{}, fmt.Errorf("reading the target broker's version: %w", err)
	}
	types, err := readExchangeTypes(ctx, c)
	return upgrade.Green{Version: v, ExchangeTypes: types}, err
}

// readExchangeTypes: GET /api/overview exchange_types, the types the
// node has enabled, built in and from plugins (3.10.8, 4.0.5 and 4.3.6
// alike).
func readExchangeTypes(ctx context.Context, c *broker.Client) ([]string, error) {
	var o struct {
		Types []struct {
			Name string `json:"name"`
		} `json:"exchange_types"`
	}
	if err := get(ctx, c, "/api/overview", &o); err != nil {
		return nil, err
	}
	out := []string{} // not nil: read
	for _, t := range o.Types {
		out = append(out, t.Name)
	}
	return out, nil
}

func readChannels(ctx context.Context, c *broker.Client, ve string, s *upgrade.Snapshot) error {
	var cs []struct {
		Name           string `json:"name"`
		User           string `json:"user"`
		GlobalPrefetch int    `json:"global_prefetch_count"`
	}
	if err := get(ctx, c, "/api/vhosts/"+ve+"/channels", &cs); err != nil {
		return err
	}
	for _, ch := range cs {
		s.Channels = append(s.Channels, upgrade.Channel{Name: ch.Name, User: ch.User, GlobalPrefetch: ch.GlobalPrefetch})
	}
	return nil
}

func readConsumers(ctx context.Context, c *broker.Client, ve string, s *upgrade.Snapshot) error {
	var cs []struct {
		Queue struct {
			Name string `json:"name"`
		} `json:"queue"`
		Tag         string `json:"consumer_tag"`
		AckRequired bool   `json:"ack_required"`
		Channel     struct {
			Name string `json:"name"`
		} `json:"channel_details"`
		Arguments map[string]any `json:"arguments"`
	}
	if err := get(ctx, c, "/api/consumers/"+ve, &cs); err != nil {
		return err
	}
	for _, x := range cs {
		s.Consumers = append(s.Consumers, upgrade.Consumer{Queue: x.Queue.Name, Tag: x.Tag, Channel: x.Channel.Name,
			AckRequired: x.AckRequired, Arguments: x.Arguments})
	}
	return nil
}

// readDeprecated: 3.13 and later answer GET /api/deprecated-features/used;
// 3.10.8 answers it 406 (seen live), so earlier releases are not asked.
func readDeprecated(ctx context.Context, c *broker.Client, s *upgrade.Snapshot) error {
	if s.Version.Known() && !s.Version.AtLeast(3, 13) {
		return nil
	}
	var fs []struct {
		Name string `json:"name"`
	}
	err := c.GetJSON(ctx, "/api/deprecated-features/used", nil, &fs)
	if errors.Is(err, broker.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading /api/deprecated-features/used: %w", err)
	}
	s.DeprecatedKnown = true
	for _, f := range fs {
		s.Deprecated = append(s.Deprecated, f.Name)
	}
	return nil
}

// readKhepri: whether the khepri_db feature flag is enabled.
func readKhepri(ctx context.Context, c *broker.Client, s *upgrade.Snapshot) error {
	var ffs []struct {
		Name  string `json:"name"`
		State string `json:"state"`
	}
	if err := get(ctx, c, "/api/feature-flags", &ffs); err != nil {
		return err
	}
	for _, f := range ffs {
		if f.Name == "khepri_db" && f.State == "enabled" {
			s.Khepri = true
		}
	}
	return nil
}
