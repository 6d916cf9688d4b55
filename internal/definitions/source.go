package definitions

import (
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Clean drops from a current topology what clients create for themselves
// and rmqtopo must neither plan around nor fingerprint: server-named queues
// (amq.gen-*, never declarable by name), the apply lock queue, rmqtopo's
// ownership records (read apart, see Document.Records), and the bindings
// to them. Exclusive queues are already absent from definitions.
func Clean(t topology.Topology) topology.Topology {
	dropped := map[topology.Address]bool{}
	exchanges := slices.Grow(t.Exchanges[:0:0], len(t.Exchanges))
	for _, e := range t.Exchanges {
		if topology.IsRecordExchange(e.Name) {
			dropped[e.Addr()] = true
			continue
		}
		exchanges = append(exchanges, e)
	}
	t.Exchanges = exchanges
	queues := slices.Grow(t.Queues[:0:0], len(t.Queues))
	for _, q := range t.Queues {
		if topology.Reserved(q.Name) || q.Name == contract.LockQueue {
			dropped[q.Addr()] = true
			continue
		}
		queues = append(queues, q)
	}
	t.Queues = queues
	bindings := slices.Grow(t.Bindings[:0:0], len(t.Bindings))
	for _, b := range t.Bindings {
		dest := topology.Address{Kind: topology.KindQueue, Vhost: b.Vhost, Name: b.Destination}
		if b.DestinationType == topology.DestExchange {
			dest.Kind = topology.KindExchange
		}
		if dropped[dest] || dropped[topology.Address{Kind: topology.KindExchange, Vhost: b.Vhost, Name: b.Source}] {
			continue
		}
		bindings = append(bindings, b)
	}
	t.Bindings = bindings
	return t
}

// FileSource is a plan.Source that reads a definitions export (rabbitmqctl
// export_definitions, GET /api/definitions[/{vhost}]) instead of a broker.
// An export holds no message counts, so Count leaves every count unknown.
// It holds the ownership records (exchanges, see topology.RecordPrefix) of
// the vhosts it covers; a vhost with objects but no record at all is
// marked in State.NoRecords, because an export may have been taken by
// other means or before rmqtopo kept its records there. The empty Path,
// and "empty", stand for a broker with nothing on it.
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
	if st.Records, err = doc.Records(vhosts...); err != nil {
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
	for _, v := range doc.Vhosts {
		if q := v.DefaultQueueType(); q != "" {
			st.DefaultQueueType[v.Name] = q
		}
	}
	markNoRecords(st)
	return st, nil
}

// markNoRecords marks the vhosts of st that hold objects but no record.
func markNoRecords(st *topology.State) {
	has := map[string]bool{}
	for _, r := range st.Records {
		has[r.Vhost] = true
	}
	objects := map[string]bool{}
	for _, e := range st.Topology.Exchanges {
		objects[e.Vhost] = true
	}
	for _, q := range st.Topology.Queues {
		objects[q.Vhost] = true
	}
	for _, p := range st.Topology.Policies {
		objects[p.Vhost] = true
	}
	for v := range objects {
		if !has[v] {
			st.NoRecords[v] = true
		}
	}
}

// Count does nothing: an export holds no message counts.
func (FileSource) Count(context.Context, *topology.State, map[string][]string) error { return nil }
