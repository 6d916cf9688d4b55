package importer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/rmqtopo/rmqtopo/internal/definitions"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Source is what an import reads from a live broker: *broker.Client.
type Source interface {
	// Read returns the state of vhosts (see plan.Source).
	Read(ctx context.Context, vhosts []string) (*topology.State, error)
	// ExportVhost returns the definitions export of one vhost, for the
	// objects Read does not carry (see Extras).
	ExportVhost(ctx context.Context, vhost string) ([]byte, error)
	// Version returns the broker's RabbitMQ version.
	Version(ctx context.Context) (topology.Version, error)
	// URL is the broker's address without credentials.
	URL() string
}

// FromBroker reads the Input of vhost from a live broker.
func FromBroker(ctx context.Context, b Source, vhost string) (Input, error) {
	in := Input{Vhost: vhost}
	st, err := b.Read(ctx, []string{vhost})
	if err != nil {
		return in, err
	}
	if len(st.Topology.Vhosts) == 0 {
		return in, fmt.Errorf("vhost %q does not exist on %s", vhost, b.URL())
	}
	data, err := b.ExportVhost(ctx, vhost)
	if err != nil {
		return in, err
	}
	if in.Skipped, err = Extras(data, vhost); err != nil {
		return in, err
	}
	in.Topology, in.Records, in.Source = st.Topology, st.Records, "the broker at "+b.URL()
	if v, err := b.Version(ctx); err == nil {
		in.Source += " (RabbitMQ " + v.String() + ")"
		in.Release = v
	}
	return in, nil
}

// FromFile reads the Input of vhost from a definitions export.
func FromFile(path, vhost string) (Input, error) {
	in := Input{Vhost: vhost}
	data, err := os.ReadFile(path)
	if err != nil {
		return in, err
	}
	doc, err := definitions.Decode(data, vhost)
	if err != nil {
		return in, fmt.Errorf("%s: %w", path, err)
	}
	in.Topology = definitions.Clean(doc.ToTopology(vhost))
	if len(doc.Vhosts) > 0 && !slices.Contains(in.Topology.Vhosts, vhost) {
		return in, fmt.Errorf("%s has no vhost %q", path, vhost)
	}
	if in.Skipped, err = Extras(data, vhost); err != nil {
		return in, fmt.Errorf("%s: %w", path, err)
	}
	if in.Records, err = doc.Records(vhost); err != nil {
		return in, fmt.Errorf("%s: %w", path, err)
	}
	in.Source = "the definitions file " + filepath.Base(path)
	if v, err := topology.ParseVersion(doc.RabbitVersion); err == nil {
		in.Source += " (RabbitMQ " + v.String() + ")"
		in.Release = v
	}
	return in, nil
}
