package render_test

import (
	"bytes"
	"regexp"
	"strings"
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
		"text":     func(b *bytes.Buffer) error { return render.PlanText(b, p, nil, render.TextOptions{}) },
		"json":     func(b *bytes.Buffer) error { return render.PlanJSON(b, p, nil) },
		"markdown": func(b *bytes.Buffer) error { return render.PlanMarkdown(b, p, nil, render.MarkdownOptions{}) },
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

// TestMarkdownRoutineIsNotDestructive: a delay change's binding swap and
// its empty retired wait queue are not headlined as destructive; a delete
// that destroys messages still is.
func TestMarkdownRoutineIsNotDestructive(t *testing.T) {
	wait := func(name string) topology.Queue {
		return topology.Queue{Vhost: "/", Name: name, Durable: true, Arguments: topology.Args{"x-message-ttl": int64(3000)}}
	}
	retry := topology.Exchange{Vhost: "/", Name: "sms.send.retry", Type: "headers", Durable: true}
	bindTo := func(q string) topology.Binding {
		return topology.Binding{Vhost: "/", Source: retry.Name, Destination: q, DestinationType: topology.DestQueue,
			Arguments: topology.Args{"x-match": "all", "rmqtopo-attempt": "2"}}
	}
	work := topology.Queue{Vhost: "/", Name: "sms.send", Durable: true, Arguments: topology.Args{}}
	old := topology.Topology{Vhosts: []string{"/"}, Exchanges: []topology.Exchange{retry},
		Queues: []topology.Queue{work, wait("rmqtopo.wait.3s")}, Bindings: []topology.Binding{bindTo("rmqtopo.wait.3s")}}
	next := topology.Topology{Vhosts: []string{"/"}, Exchanges: []topology.Exchange{retry},
		Queues: []topology.Queue{work, wait("rmqtopo.wait.5s")}, Bindings: []topology.Binding{bindTo("rmqtopo.wait.5s")}}
	owned := map[topology.Address]bool{}
	for _, q := range old.Queues {
		owned[q.Addr()] = true
	}
	owned[old.Bindings[0].Addr()] = true
	gone := topology.Address{Kind: topology.KindQueue, Vhost: "/", Name: "rmqtopo.wait.3s"}
	for _, tc := range []struct {
		messages    int64
		destructive bool
	}{{0, false}, {4, true}} {
		p := plan.DiffTopology(old, next, plan.Options{Owned: owned, Prune: true, IsWaitQueue: func(string) bool { return false },
			Messages: map[topology.Address]int64{gone: tc.messages}, Consumers: map[topology.Address]int64{gone: 0}})
		var b bytes.Buffer
		if err := render.PlanMarkdown(&b, p, nil, render.MarkdownOptions{}); err != nil {
			t.Fatal(err)
		}
		summary, _, _ := strings.Cut(b.String(), "**Changes by queue**")
		if got := strings.Contains(summary, "**Destructive changes**"); got != tc.destructive {
			t.Errorf("%d messages in the retired wait queue: destructive changes listed %t, want %t:\n%s", tc.messages, got, tc.destructive, summary)
		}
		if strings.Contains(summary, "delete binding") {
			t.Errorf("the re-pointed retry binding is listed as destructive:\n%s", summary)
		}
	}
}

// TestMermaidReturnQueue: a shared wait queue of a queue with a return
// queue hands its retries back through the return queue, and the diagram
// draws that path, not one straight back to the work queue.
func TestMermaidReturnQueue(t *testing.T) {
	q := func(name string, args topology.Args) topology.Queue {
		return topology.Queue{Vhost: "/", Name: name, Durable: true, Arguments: args}
	}
	top := topology.Topology{Vhosts: []string{"/"},
		Exchanges: []topology.Exchange{{Vhost: "/", Name: "sms.send.retry", Type: "headers", Durable: true}},
		Queues: []topology.Queue{
			q("sms.send", nil),
			q("sms.send.return", topology.Args{"x-message-ttl": int64(5000), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "sms.send"}),
			q("rmqtopo.wait.3s", topology.Args{"x-message-ttl": int64(3000), "x-dead-letter-exchange": ""}),
		},
		Bindings: []topology.Binding{{Vhost: "/", Source: "sms.send.retry", Destination: "rmqtopo.wait.3s", DestinationType: topology.DestQueue,
			Arguments: topology.Args{"x-match": "all", "rmqtopo-attempt": "2"}}},
	}
	var b bytes.Buffer
	if err := render.Mermaid(&b, top); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, m := range regexp.MustCompile(`(\w+)\[\("([^"]+)"\)\]`).FindAllStringSubmatch(b.String(), -1) {
		ids[m[2]] = m[1]
	}
	wait, work, ret := ids["rmqtopo.wait.3s"], ids["sms.send"], ids["sms.send.return"]
	if wait == "" || work == "" || ret == "" {
		t.Fatalf("nodes not found in:\n%s", b.String())
	}
	edge := func(from, to string) bool {
		return regexp.MustCompile(`(?m)^\s*` + from + ` -\.?->(\|[^|]*\|)? ` + to + `$`).MatchString(b.String())
	}
	if edge(wait, work) {
		t.Errorf("diagram draws rmqtopo.wait.3s -> sms.send:\n%s", b.String())
	}
	if !edge(wait, ret) || !edge(ret, work) {
		t.Errorf("diagram lacks rmqtopo.wait.3s -> sms.send.return -> sms.send:\n%s", b.String())
	}
}
