package importer_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

// handMadeVhost is the vhost of issue 43: a topic exchange, a quorum work
// queue invoice.create dead-lettering into its DLQ invoice.create.failed
// through the default exchange, and a TTL retry queue dead-lettering back
// into the work queue.
func handMadeVhost() topology.Topology {
	quorum := func(name string, args topology.Args) topology.Queue {
		a := topology.Args{"x-queue-type": "quorum"}
		for k, v := range args {
			a[k] = v
		}
		return topology.Queue{Vhost: "billing", Name: name, Durable: true, Arguments: a}
	}
	t := topology.Topology{Vhosts: []string{"billing"},
		Exchanges: []topology.Exchange{{Vhost: "billing", Name: "billing", Type: "topic", Durable: true}},
		Queues: []topology.Queue{
			quorum("invoice.create", topology.Args{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "invoice.create.failed"}),
			quorum("invoice.create.retry", topology.Args{"x-message-ttl": int64(5000), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "invoice.create"}),
			quorum("invoice.create.failed", nil),
		},
		Bindings: []topology.Binding{{Vhost: "billing", Source: "billing", Destination: "invoice.create", DestinationType: topology.DestQueue, RoutingKey: "invoice.create"}},
	}
	t.Sort()
	return t
}

// TestImportAdoptsAHandMadeScheme (issue 43 point 1): the user's vhost
// imports as one queue with rmqtopo's retries at the retry queue's TTL,
// its DLQ kept by name, the retry queue retired and migrate set; nothing
// is written raw or left out.
func TestImportAdoptsAHandMadeScheme(t *testing.T) {
	res := mustImport(t, "billing", handMadeVhost())
	if res.Adopted != 1 || res.Recognised != 0 || len(res.Skipped) != 0 || res.Unrecorded {
		t.Errorf("adopted %d, recognised %d, skipped %v, unrecorded %v; want 1, 0, none, false", res.Adopted, res.Recognised, res.Skipped, res.Unrecorded)
	}
	body := string(res.YAML)
	body = body[strings.Index(body, "queues:"):]
	want := `queues:
  # hand-made retry scheme:
  # adopted: its retries were TTL queues dead-lettering back into it (invoice.create.retry), retired
  # by the first queue they return to: they go on returning what they hold at its time, and
  # a pruning apply deletes each once empty. The delays are their TTLs, one retry each; how many
  # retries the service made is its own.
  - name: invoice.create
    type: quorum
    bindings:
      - exchange: billing
        routing_key: invoice.create
    retry: {delays: [5s]}
    dlq_name: invoice.create.failed
    retire:
      - invoice.create.retry
    migrate: true
`
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("spec (-want +got):\n%s\n%s", diff, res.YAML)
	}
}

// TestImportAdoptsHandMadeShapes: the other common hand-made shapes. TTL
// queues, one per delay, dead-lettering back through an exchange (DLX)
// with the work queue's key, and a DLQ found by name; one TTL queue
// shared by two work queues, dead-lettering through a direct exchange
// that binds each by its own name (each retried at its TTL, the first by
// name retiring it); a work queue dead-lettering into its DLQ through a
// fanout. Beside them rmqtopo's own queues and a queue with no scheme
// import as before.
func TestImportAdoptsHandMadeShapes(t *testing.T) {
	live := mustParse(t, `version: 1
vhost: v
exchanges:
  - {name: in, type: topic}
  - {name: back, type: direct}
  - {name: shared.back, type: direct}
  - {name: pay.dead, type: fanout}
queues:
  - {name: ours, type: quorum, retry: {delays: [1s]}}
  - {name: plain, raw: true, type: quorum, bindings: [{exchange: in, routing_key: plain}]}
  - name: orders
    raw: true
    type: quorum
    bindings: [{exchange: in, routing_key: orders.*}, {exchange: back, routing_key: orders}]
  - {name: orders.retry.5s, raw: true, arguments: {x-message-ttl: 5000, x-dead-letter-exchange: back, x-dead-letter-routing-key: orders}}
  - {name: orders.retry.30s, raw: true, arguments: {x-message-ttl: 30000, x-dead-letter-exchange: back, x-dead-letter-routing-key: orders}}
  - {name: orders.dead, raw: true, type: quorum}
  - name: pay
    raw: true
    arguments: {x-dead-letter-exchange: pay.dead}
    bindings: [{exchange: shared.back, routing_key: pay}]
  - {name: pay.errors, raw: true, bindings: [{exchange: pay.dead}]}
  - {name: ship, raw: true, bindings: [{exchange: shared.back, routing_key: ship}]}
  - {name: later, raw: true, arguments: {x-message-ttl: 10000, x-dead-letter-exchange: shared.back}}
`)
	res := mustImport(t, "v", live)
	if res.Adopted != 3 || res.Recognised != 1 || len(res.Skipped) != 0 {
		t.Errorf("adopted %d, recognised %d, skipped %v; want 3, 1, none:\n%s", res.Adopted, res.Recognised, res.Skipped, res.YAML)
	}
	type got struct {
		Delays  string
		DLQ     string
		Retire  []string
		Migrate bool
	}
	want := map[string]got{
		"orders": {"[5s 30s]", "orders.dead", []string{"orders.retry.5s", "orders.retry.30s"}, true},
		"pay":    {"[10s]", "pay.errors", []string{"later"}, true},
		"ship":   {"[10s]", "ship.dlq", nil, true},
	}
	for _, q := range res.File.Spec.Queues {
		w, ok := want[q.Name]
		if !ok {
			continue
		}
		delete(want, q.Name)
		g := got{fmt.Sprint(q.Retry.Delays()), spec.DLQOf(q), q.Retire, q.Migrate}
		if diff := cmp.Diff(w, g); diff != "" {
			t.Errorf("queue %s (-want +got):\n%s\n%s", q.Name, diff, res.YAML)
		}
	}
	if len(want) > 0 {
		t.Errorf("not adopted: %v\n%s", want, res.YAML)
	}
}
