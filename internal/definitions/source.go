package definitions

import (
	"context"
	"fmt"
	"os"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Clean drops from a current topology what clients create for themselves
// and rmqtopo must neither plan around nor fingerprint: server-named queues
// (amq.gen-*, never declarable by name), the apply lock queue, and the
// bindings to them. Exclusive queues are already absent from definitions.
func Clean(t topology.Topology) topology.Topology {
	dropped := map[topology.Address]bool{}
	queues := t.Queues[:0:0]
	for _, q := range t.Queues {
		if topology.Reserved(q.Name) || q.Name == contract.LockQueue {
			dropped[q.Addr()] = true
			continue
		}
		queues = append(queues, q)
	}
	t.Queues = queues
	bindings := t.Bindings[:0:0]
	for _, b := range t.Bindings {
		if b.DestinationType == topology.DestQueue && dropped[topology.Address{Kind: topology.KindQueue, Vhost: b.Vhost, Name: b.Destination}] {
			continue
		}
		bindings = append(bindings, b)
	}
	t.Bindings = bindings
	return t
}

// FileSource is a plan.Source that reads a definitions export (rabbitmqctl
// export_definitions, GET /api/definitions[/{vhost}]) instead of a broker.
// An export holds no message counts, so Count leaves every count unknown,
// and no ownership record, so nothing in it is owned. The empty Path, and
// "empty", stand for a broker with nothing on it.
type FileSource struct {
	Path string
}

// Read decodes the file; a single-vhost export describes the one vhost
// asked for.
func (f FileSource) Read(_ context.Context, vhosts []string) (*topology.State, error) {
	st := topology.NewState(vhosts)
	if f.Path == "" || f.Path == "empty" {
		return st, nil
	}
	data, err := os.ReadFile(f.Path)
	if err != nil {
		return nil, err
	}
	def := ""
	if len(vhosts) == 1 {
		def = vhosts[0]
	}
	doc, err := Decode(data, def)
	if err != nil {
		return nil, fmt.Errorf("read definitions %s: %w", f.Path, err)
	}
	t := Clean(doc.ToTopology(vhosts...))
	if len(doc.Vhosts) == 0 && def != "" {
		// A single-vhost export has no vhost list; it describes def.
		t.Vhosts = []string{def}
	}
	st.Topology = t
	// The export says which RabbitMQ wrote it, which is the best guess of
	// the broker a plan against it is for.
	st.BrokerVersion = doc.RabbitVersion
	return st, nil
}

// Count does nothing: an export holds no message counts.
func (FileSource) Count(context.Context, *topology.State, map[string][]string) error { return nil }
