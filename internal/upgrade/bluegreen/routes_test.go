package bluegreen

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

const twoQueues = `version: 1
vhost: /
queues:
  - name: orders
    type: quorum
    dlq: true
    parking_lot: true
    retry: {delays: [1s, 5s]}
  - name: mail
    type: quorum
    layout: per-attempt
    return_queue: false
    retry: {delays: [2s]}
`

// layouts expands twoQueues for a 3.10 blue (shared with a return queue
// for orders, per-attempt without one for mail) and a 4.3.6 green (native
// for orders).
func layouts(t *testing.T) ([]*spec.File, topology.Topology, topology.Topology) {
	t.Helper()
	f, err := spec.Parse("s.yaml", []byte(twoQueues))
	if err != nil {
		t.Fatal(err)
	}
	files := []*spec.File{f}
	green, _ := topology.ParseVersion("4.3.6")
	spec.Resolve(files, spec.Target{RabbitMQ: green})
	g := spec.ExpandFor(green, files...)
	blue, _ := topology.ParseVersion("3.10.8")
	spec.Resolve(files, spec.Target{RabbitMQ: blue})
	return files, spec.ExpandFor(blue, files...), g
}

func TestPlan(t *testing.T) {
	files, blue, green := layouts(t)
	got, err := Plan(files, blue, green)
	if err != nil {
		t.Fatal(err)
	}
	want := Layout{
		Routes: []Route{
			{"/", "mail", "mail"},
			{"/", "mail.dlq", "mail.dlq"},
			{"/", "orders", "orders"},
			{"/", "orders.dlq", "orders.dlq"},
			{"/", "orders.parking-lot", "orders.parking-lot"},
			{"/", "orders.return", "orders"}, // due already: to the work queue
		},
		Waiting: []Queue{{"/", "mail.wait.1.2s"}, {"/", "rmqtopo.wait.1s"}, {"/", "rmqtopo.wait.5s"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("layout (-want +got):\n%s", diff)
	}
}

func TestPlanNeedsTheSpecOnGreen(t *testing.T) {
	files, blue, _ := layouts(t)
	_, err := Plan(files, blue, topology.Topology{})
	if err == nil || !strings.Contains(err.Error(), "apply the spec on green first") || !strings.Contains(err.Error(), `"orders"`) {
		t.Fatalf("Plan against an empty green: %v", err)
	}
}
