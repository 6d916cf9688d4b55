package importer_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rmqtopo/rmqtopo/importer"
	"github.com/rmqtopo/rmqtopo/topology"
)

// FromFile reads one vhost of a definitions export and names the file and
// its RabbitMQ version as the source; a vhost the export lacks is refused.
func TestFromFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "defs.json")
	defs := `{"rabbit_version": "3.12.1", "vhosts": [{"name": "shop"}],
	  "queues": [{"name": "orders", "vhost": "shop", "durable": true, "arguments": {}}],
	  "users": [{"name": "u"}]}`
	if err := os.WriteFile(path, []byte(defs), 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := importer.FromFile(path, "shop")
	if err != nil {
		t.Fatal(err)
	}
	if in.Source != "the definitions file defs.json (RabbitMQ 3.12.1)" || len(in.Topology.Queues) != 1 || in.Vhost != "shop" {
		t.Errorf("input %+v", in)
	}
	if _, err := importer.FromFile(path, "nope"); err == nil || !strings.HasSuffix(err.Error(), `defs.json has no vhost "nope"`) {
		t.Errorf("missing vhost: %v", err)
	}
}

// fakeBroker is a broker of one vhost, shop.
type fakeBroker struct{ versionErr error }

func (fakeBroker) Read(_ context.Context, vhosts []string) (*topology.State, error) {
	st := topology.NewState(vhosts)
	if vhosts[0] == "shop" {
		st.Topology.Vhosts = []string{"shop"}
	}
	return st, nil
}
func (fakeBroker) ExportVhost(context.Context, string) ([]byte, error) { return []byte(`{}`), nil }
func (b fakeBroker) Version(context.Context) (topology.Version, error) {
	v, err := topology.ParseVersion("3.10.8")
	if b.versionErr != nil {
		err = b.versionErr
	}
	return v, err
}
func (fakeBroker) URL() string { return "http://broker:15672" }

// FromBroker names the broker (and its version, when it tells) as the
// source, and refuses a vhost the broker does not have.
func TestFromBroker(t *testing.T) {
	in, err := importer.FromBroker(context.Background(), fakeBroker{}, "shop")
	if err != nil || in.Source != "the broker at http://broker:15672 (RabbitMQ 3.10.8)" {
		t.Errorf("source %q, err %v", in.Source, err)
	}
	in, err = importer.FromBroker(context.Background(), fakeBroker{versionErr: errors.New("no")}, "shop")
	if err != nil || in.Source != "the broker at http://broker:15672" {
		t.Errorf("without a version: source %q, err %v", in.Source, err)
	}
	if _, err := importer.FromBroker(context.Background(), fakeBroker{}, "nope"); err == nil ||
		err.Error() != `vhost "nope" does not exist on http://broker:15672` {
		t.Errorf("missing vhost: %v", err)
	}
}
