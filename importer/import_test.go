package importer_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/importer"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

func mustParse(t *testing.T, src string) topology.Topology { return mustParseB(t, src) }

func mustParseB(t testing.TB, src string) topology.Topology {
	t.Helper()
	f, err := spec.Parse("in.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return spec.Expand(f)
}

// TestImportLeavesOutWhatTheSpecRefuses: objects the spec cannot express
// are listed with the validator's own reason and everything else still
// round-trips.
func TestImportLeavesOutWhatTheSpecRefuses(t *testing.T) {
	live := mustParse(t, "version: 1\nvhost: v\nexchanges: [{name: in, type: topic}]\nqueues: [{name: ok, raw: true, bindings: [{exchange: in}]}]\n")
	live.Queues = append(live.Queues, topology.Queue{Vhost: "v", Name: "typo", Durable: true, Arguments: topology.Args{"x-max-lenght": int64(5)}})
	live.Exchanges = append(live.Exchanges, topology.Exchange{Vhost: "v", Name: "odd", Type: "weird", Durable: true})
	live.Policies = append(live.Policies, topology.Policy{Vhost: "v", Name: "look", Pattern: "^(?!x)", ApplyTo: "queues", Definition: topology.Args{"max-length": int64(1)}})
	live.Policies = append(live.Policies, topology.Policy{Vhost: "v", Name: "rmqtopo.queue.gone", Pattern: "^gone$", ApplyTo: "queues",
		Priority: 100, Definition: topology.Args{"message-ttl": int64(1000)}})
	live.Bindings = append(live.Bindings, topology.Binding{Vhost: "v", Source: "in", Destination: "gone", DestinationType: "queue"})
	live.Sort()
	res, err := importer.Import(importer.Input{Vhost: "v", Topology: live, Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range res.Skipped {
		got = append(got, s.Object)
	}
	want := []string{
		`binding "in -> gone" [queue key=""] in vhost "v"`,
		`exchange "odd" in vhost "v"`,
		`policy "look" in vhost "v"`,
		`policy "rmqtopo.queue.gone" in vhost "v"`,
		`queue "typo" in vhost "v"`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	for _, s := range res.Skipped {
		if !strings.Contains(string(res.YAML), s.Object) {
			t.Errorf("the spec's header does not list %s:\n%s", s.Object, res.YAML)
		}
	}
	if r := res.Skipped[3].Reason; !strings.Contains(r, "rmqtopo's own policy") || !strings.Contains(r, `queue "gone", which the vhost does not have`) {
		t.Errorf("reason for the rmqtopo policy no queue generates: %q", res.Skipped[3].Reason)
	}
	if !strings.Contains(res.Skipped[4].Reason, `unknown queue argument "x-max-lenght"`) {
		t.Errorf("reason for the queue: %q", res.Skipped[4].Reason)
	}
}

// TestImportDemotesRetryTopologyOthersBindTo: a work queue whose retry
// exchange something else is bound to cannot be written as a retry block
// (a spec cannot bind a generated exchange), so everything is written raw
// and still round-trips, less a's rmqtopo-managed policies: a spec's own
// policies may not take their names, so they are listed as not imported.
// Its shared wait queue then cannot be generated for another queue
// either, which is why b uses other delays.
func TestImportDemotesRetryTopologyOthersBindTo(t *testing.T) {
	live := mustParse(t, `version: 1
vhost: v
exchanges: [{name: in, type: topic}]
queues:
  - {name: a, type: quorum, delivery_limit: 5, retry: {delays: [1s]}, bindings: [{exchange: in}]}
  - {name: b, retry: {delays: [5s, 10s]}, arguments: {x-single-active-consumer: true}}
`)
	live.Bindings = append(live.Bindings, topology.Binding{Vhost: "v", Source: "a.retry", Destination: "in", DestinationType: "exchange"})
	live.Sort()
	res, err := importer.Import(importer.Input{Vhost: "v", Topology: live, Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(without(live, res.Skipped), spec.Expand(res.File)); diff != "" {
		t.Errorf("(-want +got):\n%s\n%s", diff, res.YAML)
	}
	want := []string{`policy "rmqtopo.queue.a" in vhost "v"`}
	if diff := cmp.Diff(want, skippedManaged(res)); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	if res.Recognised != 1 || !strings.Contains(string(res.YAML), "x-single-active-consumer: true") {
		t.Errorf("want only b recognised, with its argument:\n%s", res.YAML)
	}
}

// TestImportRoundTripsEverySpecFeature: a spec that uses every key
// imports back into a spec that expands to the same topology, with every
// queue that has retry topology recognised.
func TestImportRoundTripsEverySpecFeature(t *testing.T) {
	want := mustParse(t, `version: 1
vhost: shop
wait_queue_type: classic
exchanges:
  - {name: in, type: topic, internal: false, arguments: {alternate-exchange: lost}}
  - {name: lost, type: fanout, durable: false, auto_delete: true}
  - {name: mid, type: headers, internal: true, bindings: [{exchange: in, routing_key: "a.#"}]}
queues:
  - {name: q1, type: quorum, retry: {exponential: {initial: 1s, factor: 2, max: 4s, attempts: 5}}, delivery_limit: 7, parking_lot: true}
  - {name: q2, retry: {delays: [1s, 3s]}, layout: per-attempt, dlq: false, message_ttl: 1m, max_length: 10}
  - {name: q3, retry: {delays: [1s, 3s]}, layout: per-attempt, return_queue: true}
  - {name: q4, type: quorum, retry: {delays: [1s]}, return_queue: true}
  - {name: q10, immediate_retries: 3, dlq: false}
  - {name: q11, type: quorum, retry: {linear: {step: 2s, attempts: 2}}, immediate_retries: 1, arguments: {x-max-length-bytes: 100}}
  - name: q12
    bindings: [{exchange: mid, arguments: {x-match: any, kind: "1"}}]
  - {name: g, preset: goqueue, type: quorum, retry: {fixed: {delay: 1s, attempts: 2}}, dlq: false,
     preset_options: {queue_arguments: {x-single-active-consumer: true}}}
  - {name: g2, preset: goqueue, retry: {delays: [2s]}, message_ttl: 1h}
  - {name: o, preset: outbox, retry: {delays: [5s, 10s]}}
  - name: s
    preset: spring
    retry: {delays: [1s, 3s]}
    preset_options: {wait_exchange: w, return_exchange: back, wait_queue_prefix: "wq-", dead_letter_exchange: s.dead}
  - {name: s2, preset: spring, retry: {delays: [1s, 3s]}, dlq: false, max_length: 4,
     preset_options: {wait_exchange: w, return_exchange: back, wait_queue_prefix: "wq-"}}
  - {name: r, raw: true, type: quorum, arguments: {x-max-length: 5, x-dead-letter-exchange: lost}, bindings: [{exchange: lost}]}
policies:
  - {name: p2, pattern: "^q", apply_to: exchanges, priority: -3, definition: {federation-upstream-set: all}}
  - {name: p10, pattern: "^r$", definition: {max-length: 9}}
`)
	res, err := importer.Import(importer.Input{Vhost: "shop", Topology: want, Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, spec.Expand(res.File)); diff != "" {
		t.Errorf("(-want +got):\n%s\n%s", diff, res.YAML)
	}
	if res.Recognised != 12 || len(res.Skipped) != 0 {
		t.Errorf("recognised %d, skipped %v:\n%s", res.Recognised, res.Skipped, res.YAML)
	}
}

// skippedManaged lists the objects res leaves out, checking that each is
// rmqtopo's own policy, left out for that reason.
func skippedManaged(res *importer.Result) []string {
	var out []string
	for _, s := range res.Skipped {
		if !strings.Contains(s.Reason, "rmqtopo's own policy") {
			return append(out, "not a managed policy: "+s.String())
		}
		out = append(out, s.Object)
	}
	return out
}

// TestImportSaysWhyItDropsRmqtopoPolicies: a queue whose retry topology is
// not as rmqtopo declares it is written raw; its rmqtopo policy is left
// out with a reason that names the queue, the object that differs, and
// the settings the spec therefore lacks.
func TestImportSaysWhyItDropsRmqtopoPolicies(t *testing.T) {
	live := mustParse(t, "version: 1\nvhost: v\nqueues: [{name: a, type: quorum, delivery_limit: 5, message_ttl: 1h, retry: {delays: [5s]}}]\n")
	for i, q := range live.Queues {
		if q.Name == "a.dlq" {
			live.Queues[i].Arguments["x-max-length"] = int64(9)
		}
	}
	res := mustImport(t, "v", live)
	if len(res.Skipped) != 1 || res.Recognised != 0 {
		t.Fatalf("recognised %d, skipped %v", res.Recognised, res.Skipped)
	}
	for _, w := range []string{`"rmqtopo.queue.a"`, `queue "a" is written raw`, `queue "a.dlq" in vhost "v" is not as it would declare it`,
		"delivery-limit=5, message-ttl=3600000"} {
		if !strings.Contains(res.Skipped[0].String(), w) {
			t.Errorf("the reason lacks %q: %s", w, res.Skipped[0])
		}
	}
}
