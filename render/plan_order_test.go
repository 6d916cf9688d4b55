package render_test

import (
	"bytes"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/render"
	"github.com/rmqtopo/rmqtopo/topology"
)

// TestPlanViewsShareOneOrder: the text, JSON and Markdown plans list
// queues x1, x2, x10 in that order (natural order), not x1, x10, x2.
func TestPlanViewsShareOneOrder(t *testing.T) {
	var desired topology.Topology
	desired.Vhosts = []string{"/"}
	for _, n := range []string{"x1", "x10", "x2"} { // byte order, as expansion sorts
		desired.Queues = append(desired.Queues, topology.Queue{Vhost: "/", Name: n, Durable: true, Arguments: topology.Args{}})
	}
	p := plan.DiffTopology(topology.Topology{Vhosts: []string{"/"}}, desired, plan.Options{})
	want := []string{"x1", "x2", "x10"}
	queueNames := regexp.MustCompile(`queue "(x\d+)"|"name": "(x\d+)"|` + "`(x\\d+)`")
	for name, write := range map[string]func(*bytes.Buffer) error{
		"text":     func(b *bytes.Buffer) error { return render.PlanText(b, p, nil, false) },
		"json":     func(b *bytes.Buffer) error { return render.PlanJSON(b, p, nil) },
		"markdown": func(b *bytes.Buffer) error { return render.PlanMarkdown(b, p, nil) },
	} {
		var b bytes.Buffer
		if err := write(&b); err != nil {
			t.Fatal(err)
		}
		var got []string
		seen := map[string]bool{}
		for _, m := range queueNames.FindAllStringSubmatch(b.String(), -1) {
			n := m[1] + m[2] + m[3]
			if !seen[n] {
				seen[n] = true
				got = append(got, n)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s plan's order of queues (-want +got):\n%s\n%s", name, diff, b.String())
		}
	}
}
