package spec

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/topology"
)

// TestPresetOptions: the names and arguments a library lets its user
// choose reach the declared objects.
func TestPresetOptions(t *testing.T) {
	f := mustParse(t, "spec.yaml", `version: 1
queues:
  - name: a
    preset: spring
    preset_options: {wait_exchange: w.x, return_exchange: r.x, wait_queue_prefix: "a-wait-", dead_letter_exchange: a.dead}
    retry: {delays: [1500ms]}
  - name: g
    preset: goqueue
    preset_options: {queue_arguments: {x-max-priority: 5}}
`)
	top := Expand(f)
	var names []string
	for _, e := range top.Exchanges {
		names = append(names, "exchange "+e.Name)
	}
	for _, q := range top.Queues {
		names = append(names, "queue "+q.Name+" "+q.Arguments.String())
	}
	want := []string{
		"exchange a.dead", "exchange g.exhausted", "exchange g__retry_dlx", "exchange g__retry_exchange", "exchange r.x", "exchange w.x",
		`queue a {x-dead-letter-exchange: "a.dead"}`,
		"queue a-wait-1500 {x-dead-letter-exchange: \"r.x\", x-message-ttl: 1500}",
		"queue a.dlq {}",
		"queue g {x-max-priority: 5}",
		"queue g.dlq {}",
		`queue g.exhausted {x-dead-letter-exchange: "", x-dead-letter-routing-key: "g.dlq", x-message-ttl: 0}`,
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	b, ok := findBinding(top, "w.x", "a-wait-1500")
	if !ok || b.Arguments["wait-for"] != "1500" {
		t.Errorf("binding w.x -> a-wait-1500: %+v, %v", b, ok)
	}
}

func findBinding(top topology.Topology, source, dest string) (topology.Binding, bool) {
	for _, b := range top.Bindings {
		if b.Source == source && b.Destination == dest {
			return b, true
		}
	}
	return topology.Binding{}, false
}

func TestPresetOptionErrors(t *testing.T) {
	tests := []struct{ name, spec, want string }{
		{"options of another preset", "version: 1\nqueues:\n  - {name: a, preset: goqueue, preset_options: {wait_exchange: w}}\n",
			`unknown key "wait_exchange" (expected one of: queue_arguments)`},
		{"options without a preset", "version: 1\nqueues:\n  - {name: a, preset_options: {queue_arguments: {}}}\n",
			"preset_options needs preset goqueue or spring: the queue without a preset has no options"},
		{"spring queues disagree on shared names", "version: 1\nqueues:\n  - {name: a, preset: spring}\n  - {name: b, preset: spring, preset_options: {wait_exchange: other}}\n",
			`spring queues of one vhost share their wait and return exchanges and wait-queue prefix: queue "b" uses "other", "return", "wait-queue-"; another uses "wait", "return", "wait-queue-"`},
		{"spring queues share a DL_EXCHANGE", "version: 1\nqueues:\n  - {name: a, preset: spring, preset_options: {dead_letter_exchange: dl}}\n  - {name: b, preset: spring, preset_options: {dead_letter_exchange: dl}}\n",
			`exchange "dl" (generated for queue "b" as its dead-letter exchange (DL_EXCHANGE)) collides with the exchange generated for queue "a" as its dead-letter exchange (DL_EXCHANGE)`},
		{"goqueue arguments set the type", "version: 1\nqueues:\n  - {name: a, preset: goqueue, preset_options: {queue_arguments: {x-queue-type: quorum}}}\n",
			"queue_arguments sets x-queue-type; set the queue's type instead"},
		{"goqueue arguments take the DLQ's place", "version: 1\nqueues:\n  - {name: a, preset: goqueue, preset_options: {queue_arguments: {x-dead-letter-exchange: x}}}\n",
			"queue_arguments sets x-dead-letter-exchange, which beats the DLQ rmqtopo adds by policy; set dlq: false"},
		{"a user policy named like rmqtopo's", "version: 1\npolicies:\n  - {name: rmqtopo.queue.a, pattern: a, definition: {max-length: 1}}\n",
			`policy "rmqtopo.queue.a": names starting with "rmqtopo." belong to the policies rmqtopo manages`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, e := range mustFail(t, "spec.yaml", tt.spec) {
				got = append(got, e.Message)
			}
			if diff := cmp.Diff([]string{tt.want}, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}
