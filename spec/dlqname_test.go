package spec

import (
	"testing"

	"github.com/rmqtopo/rmqtopo/topology"
)

// TestDLQName: a queue's dlq_name names its DLQ, still fed by Q.dlx, into
// which the work queue dead-letters; no Q.dlq is made, and migrate: true
// covers the named DLQ.
func TestDLQName(t *testing.T) {
	f, err := Parse("s.yaml", []byte("version: 1\nqueues:\n  - {name: invoice.create, type: quorum, dlq_name: invoice.create.failed, migrate: true, retry: {delays: [5s]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := Expand(f)
	if _, ok := got.Queue("/", "invoice.create.failed"); !ok {
		t.Errorf("no queue invoice.create.failed in %v", got.Queues)
	}
	if _, ok := got.Queue("/", "invoice.create.dlq"); ok {
		t.Errorf("queue invoice.create.dlq made beside the named DLQ")
	}
	want := topology.Binding{Vhost: "/", Source: "invoice.create.dlx", DestinationType: topology.DestQueue, Destination: "invoice.create.failed"}
	found := false
	for _, b := range got.Bindings {
		found = found || b.Addr() == want.Addr()
	}
	if !found {
		t.Errorf("no binding %s in %v", want.Addr(), got.Bindings)
	}
	wq, _ := got.Queue("/", "invoice.create")
	if dlx := wq.Arguments["x-dead-letter-exchange"]; dlx != "invoice.create.dlx" {
		t.Errorf("work queue dead-letters to %v, want invoice.create.dlx", dlx)
	}
	if !Migrations(f)[topology.Address{Kind: topology.KindQueue, Vhost: "/", Name: "invoice.create.failed"}] {
		t.Errorf("migrate: true does not cover the named DLQ")
	}
}
