package spec_test

import (
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/spec"
)

func TestMigrations(t *testing.T) {
	f, err := spec.Parse("m.yaml", []byte(`version: 1
vhost: v
queues:
  - name: orders
    type: quorum
    migrate: true
    layout: per-attempt
    parking_lot: true
    immediate_retries: 1
    retry: {delays: [5s, 1m]}
  - name: payments
    retry: {delays: [5s]}
`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for a := range spec.Migrations(f) {
		got = append(got, a.Vhost+"/"+a.Name)
	}
	sort.Strings(got)
	want := []string{"v/orders", "v/orders.dlq", "v/orders.parking-lot", "v/orders.wait.2.5s", "v/orders.wait.3.1m"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Migrations (-want +got):\n%s", diff)
	}
	// Every name is one the spec generates.
	queues := map[string]bool{}
	for _, q := range spec.Expand(f).Queues {
		queues[q.Vhost+"/"+q.Name] = true
	}
	for _, n := range want {
		if !queues[n] {
			t.Errorf("%s is not a queue of the spec", n)
		}
	}
}
