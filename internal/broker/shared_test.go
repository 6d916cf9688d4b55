package broker_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rabbithole "github.com/michaelklishin/rabbit-hole/v2"

	"github.com/rmqtopo/rmqtopo/apply"
	"github.com/rmqtopo/rmqtopo/importer"
	"github.com/rmqtopo/rmqtopo/internal/definitions"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

// team is one spec applied to a shared vhost, the way one team's pipeline
// runs rmqtopo.
type team struct {
	l    *live
	name string
}

func (tm team) specs() map[string]string { return map[string]string{tm.l.vhost: tm.name} }

func (tm team) desired(t *testing.T, yaml string) topology.Topology {
	t.Helper()
	return spec.Expand(parseFor(t, tm.name+".yaml", []byte("version: 1\nname: "+tm.name+"\n"+yaml), tm.l.vhost))
}

func (tm team) plan(t *testing.T, yaml string, prune bool) (plan.Plan, *topology.State) {
	t.Helper()
	p, st, err := plan.Make(context.Background(), tm.l.c, tm.desired(t, yaml), plan.Choices{Specs: tm.specs(), Prune: prune})
	if err != nil {
		t.Fatalf("plan of spec %s: %v", tm.name, err)
	}
	return p, st
}

// apply plans and applies the spec as `rmqtopo apply --auto-approve` would,
// with --allow-destroy (common in pipelines, and what made a second team's
// prune destroy the first team's topology).
func (tm team) apply(t *testing.T, yaml string, prune bool) plan.Plan {
	t.Helper()
	p, st := tm.plan(t, yaml, prune)
	if b := plan.Blocking(plan.Check(p, plan.CheckOptions{AllowDestroy: true})); len(b) > 0 {
		t.Fatalf("apply of spec %s refused: %s", tm.name, b[0].Message)
	}
	if _, err := apply.Apply(context.Background(), tm.l.s, p, apply.Options{AllowDestroy: true,
		Records: plan.OwnRecords(st, tm.specs())}); err != nil {
		t.Fatalf("apply of spec %s: %v", tm.name, err)
	}
	return p
}

// mustBeEmpty fails unless the spec's plan (with prune) changes nothing.
func (tm team) mustBeEmpty(t *testing.T, yaml, after string) {
	t.Helper()
	p, _ := tm.plan(t, yaml, true)
	if diff := cmp.Diff([]string(nil), changes(p)); diff != "" {
		t.Errorf("plan of spec %s after %s is not empty (-want +got):\n%s", tm.name, after, diff)
	}
}

const teamA = `
exchanges:
  - {name: events, type: topic}
queues:
  - name: a.work
    bindings: [{exchange: events, routing_key: "a.#"}]
    retry: {delays: [1s, 5s]}
  - name: a.audit
    retry: {delays: [5s]}
`

const teamB = `
exchanges:
  - {name: events, type: topic}
queues:
  - name: b.work
    bindings: [{exchange: events, routing_key: "b.#"}]
    retry: {delays: [5s, 30s]}
`

// Two teams share a vhost, the business exchange "events" (both declare
// it, each binds its own queue) and the shared wait queue rmqtopo.wait.5s.
// B's apply, B's prune, and B dropping its retrying queue never touch A.
func TestTwoSpecsShareAVhost(t *testing.T) {
	t.Parallel()
	l := newLive(t)
	a, b := team{l, "team-a"}, team{l, "team-b"}
	a.apply(t, teamA, false)
	a.mustBeEmpty(t, teamA, "its own apply")

	// B without --prune: A's wait queues are not B's to retire.
	b.apply(t, teamB, false)
	a.mustBeEmpty(t, teamA, "B's apply")
	b.mustBeEmpty(t, teamB, "its own apply")

	// B with --prune: nothing of A's is deleted.
	b.apply(t, teamB, true)
	a.mustBeEmpty(t, teamA, "B's prune")

	// B drops its retries: rmqtopo.wait.5s, which A still uses, stays;
	// rmqtopo.wait.30s, B's alone, goes.
	const bPlain = "exchanges:\n  - {name: events, type: topic}\nqueues:\n  - name: b.work\n    bindings: [{exchange: events, routing_key: \"b.#\"}]\n"
	p := b.apply(t, bPlain, true)
	var deleted []string
	for _, c := range p.Changes {
		if c.Action == plan.Delete && c.Address.Kind == topology.KindQueue {
			deleted = append(deleted, c.Address.Name)
			if !strings.Contains(c.Owner(), `record of spec "team-b"`) {
				t.Errorf("delete of %s says %q, want it to name team-b's record", c.Address.Name, c.Owner())
			}
		}
	}
	if diff := cmp.Diff([]string{"rmqtopo.wait.30s"}, deleted); diff != "" {
		t.Errorf("queues deleted when B dropped its retries (-want +got):\n%s", diff)
	}
	a.mustBeEmpty(t, teamA, "B dropped its retrying queue")
	if l.b.QueueDepth(t, l.vhost, "rmqtopo.wait.5s") != 0 {
		t.Error("rmqtopo.wait.5s is not there")
	}

	// A with --prune still deletes nothing of B's.
	a.apply(t, teamA, true)
	b.mustBeEmpty(t, bPlain, "A's prune")
}

// Two specs that want one object differently are an error naming both,
// not a silent replace.
func TestTwoSpecsConflict(t *testing.T) {
	t.Parallel()
	l := newLive(t)
	a, b := team{l, "team-a"}, team{l, "team-b"}
	a.apply(t, teamA, false)
	p, _ := b.plan(t, "wait_queue_type: classic\n"+teamB, false)
	ds := plan.Blocking(plan.Check(p, plan.CheckOptions{AllowDestroy: true, Specs: b.specs()}))
	var got []string
	for _, d := range ds {
		if d.Code == plan.CodeSpecConflict {
			got = append(got, d.Message)
		}
	}
	want := fmt.Sprintf(`queue "rmqtopo.wait.5s" in vhost %q: spec "team-b" and spec "team-a" (its ownership record in the vhost) declare it with different attributes; make them agree, or rename it in one of them`, l.vhost)
	if len(got) != 1 || got[0] != want {
		t.Errorf("conflicts = %q\nwant [%s]", got, want)
	}
}

// A record lives in its vhost: deleted with it. A queue made by hand in
// the vhost re-created by hand is nobody's, and survives --prune.
func TestRecordDiesWithItsVhost(t *testing.T) {
	t.Parallel()
	l := newLive(t)
	a := team{l, "team-a"}
	a.apply(t, teamA, false)
	mgmt := l.b.Mgmt(t)
	if _, err := mgmt.DeleteVhost(l.vhost); err != nil {
		t.Fatal(err)
	}
	if _, err := mgmt.PutVhost(l.vhost, rabbithole.VhostSettings{}); err != nil {
		t.Fatal(err)
	}
	grant(t, l)
	declareByHand(t, l, "a.audit")
	p, _ := a.plan(t, "queues:\n  - name: a.work\n    retry: {delays: [1s, 5s]}\n", true)
	for _, c := range p.Changes {
		if c.Action == plan.Delete {
			t.Errorf("plan --prune in a re-created vhost deletes %s", c.Address)
		}
	}
}

// Counts are exact right after publishing and right after an apply: an
// AMQP passive declare, not the management API's statistics.
func TestCountsAreExact(t *testing.T) {
	t.Parallel()
	l := newLive(t)
	a := team{l, "team-a"}
	const two = "queues:\n  - name: keep\n  - name: gone\n    dlq: false\n"
	a.apply(t, two, false)
	// Straight after the apply: counted 0, never "unknown".
	p, _ := a.plan(t, "queues:\n  - name: keep\n", true)
	if got := countOf(p, "gone"); got == nil || *got != 0 {
		t.Fatalf("count of a queue created a moment ago = %v, want 0", got)
	}
	conn := l.b.Dial(t, l.vhost)
	publish(t, conn, "", "gone", nil, 5)
	p, _ = a.plan(t, "queues:\n  - name: keep\n", true)
	if got := countOf(p, "gone"); got == nil || *got != 5 {
		t.Fatalf("count right after publishing 5 = %v, want 5", got)
	}
	ds := plan.Blocking(plan.Check(p, plan.CheckOptions{}))
	if len(ds) != 1 || ds[0].Code != plan.CodeDeleteQueueWithMessages {
		t.Errorf("diagnostics = %+v, want one RT002", ds)
	}
}

func countOf(p plan.Plan, queue string) *int64 {
	for _, c := range p.Changes {
		if c.Address.Kind == topology.KindQueue && c.Address.Name == queue && c.Action == plan.Delete {
			return c.Messages()
		}
	}
	return nil
}

// A vhost whose default queue type is quorum: the spec's classic queues
// are declared classic, and a second plan is empty.
func TestQuorumDefaultVhostConverges(t *testing.T) {
	t.Parallel()
	l := newLive(t)
	putVhostDefault(t, l, "quorum")
	a := team{l, "team-a"}
	a.apply(t, "queues:\n  - name: c\n    type: classic\n  - name: q\n    type: quorum\n", false)
	a.mustBeEmpty(t, "queues:\n  - name: c\n    type: classic\n  - name: q\n    type: quorum\n", "its apply")
	var q struct {
		Type string `json:"type"`
	}
	if err := l.c.GetJSON(context.Background(), "/api/queues/"+url.PathEscape(l.vhost)+"/c", nil, &q); err != nil || q.Type != "classic" {
		t.Errorf("queue c is %q (%v), want classic", q.Type, err)
	}
	// A queue made by hand without a type reads as the quorum queue it is.
	declareByHand(t, l, "brownfield")
	st, err := l.c.Read(context.Background(), []string{l.vhost})
	if err != nil {
		t.Fatal(err)
	}
	bf, _ := st.Topology.Queue(l.vhost, "brownfield")
	if bf.QueueType() != "quorum" {
		t.Errorf("brownfield queue reads as %q, want quorum", bf.QueueType())
	}
	// Import writes it as the quorum queue it is, and its spec plans no
	// change (issue 34, point 7).
	in, err := importer.FromBroker(context.Background(), l.c, l.vhost)
	if err != nil {
		t.Fatal(err)
	}
	res, err := importer.Import(in)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)name: brownfield\n(\s+raw: true\n)?\s+type: quorum`).Match(res.YAML) {
		t.Errorf("import of the brownfield queue:\n%s", res.YAML)
	}
	v, _ := l.c.Version(context.Background())
	p, _ := l.plan(t, spec.ExpandFor(v, res.File), false)
	if got := changes(p); len(got) != 0 {
		t.Errorf("plan of the imported spec: %v", got)
	}
}

// declareByHand declares a durable queue with no arguments, as a person
// with the management UI would.
func declareByHand(t *testing.T, l *live, name string) {
	t.Helper()
	raw(t, l, http.MethodPut, "/api/queues/"+url.PathEscape(l.vhost)+"/"+url.PathEscape(name), `{"durable":true,"arguments":{}}`)
}

// putVhostDefault re-creates the test's vhost with a default queue type:
// RabbitMQ 3.10 sets it only when it creates a vhost.
func putVhostDefault(t *testing.T, l *live, typ string) {
	t.Helper()
	raw(t, l, http.MethodDelete, "/api/vhosts/"+url.PathEscape(l.vhost), "")
	raw(t, l, http.MethodPut, "/api/vhosts/"+url.PathEscape(l.vhost), fmt.Sprintf(`{"defaultqueuetype":%q}`, typ))
	grant(t, l)
}

func grant(t *testing.T, l *live) {
	t.Helper()
	raw(t, l, http.MethodPut, "/api/permissions/"+url.PathEscape(l.vhost)+"/"+url.PathEscape(l.b.User),
		`{"configure":".*","write":".*","read":".*"}`)
}

// raw sends one management API request with the harness's credentials.
func raw(t *testing.T, l *live, method, path, body string) {
	t.Helper()
	req, err := http.NewRequest(method, l.b.MgmtURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(l.b.User, l.b.Password)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: HTTP %d", method, path, resp.StatusCode)
	}
}

// The record of an apply killed between writing a new generation and
// deleting the old is read as the newer one.
func TestRecordGenerations(t *testing.T) {
	t.Parallel()
	l := newLive(t)
	a := team{l, "team-a"}
	a.apply(t, teamA, false)
	st, err := l.c.Read(context.Background(), []string{l.vhost})
	if err != nil {
		t.Fatal(err)
	}
	r := topology.Mine(st.Records, "team-a", l.vhost)
	if r.Generation == 0 || len(r.Owned) == 0 {
		t.Fatalf("record after apply: %+v", r)
	}
	// Write a newer generation owning less, and leave the old one.
	newer := r.Clone()
	newer.Generation += 5
	delete(newer.Owned, queueAddr(l.vhost, "a.audit"))
	if err := l.c.DeclareExchange(context.Background(), topology.Exchange{Vhost: l.vhost, Name: newer.ExchangeName(),
		Type: "fanout", Durable: true, Internal: true, Arguments: recordArgs(t, newer)}); err != nil {
		t.Fatal(err)
	}
	st, err = l.c.Read(context.Background(), []string{l.vhost})
	if err != nil {
		t.Fatal(err)
	}
	got := topology.Mine(st.Records, "team-a", l.vhost)
	if got.Generation != newer.Generation || got.Owned[queueAddr(l.vhost, "a.audit")] {
		t.Errorf("read generation %d, want the newest %d", got.Generation, newer.Generation)
	}
	for _, e := range st.Topology.Exchanges {
		if topology.IsRecordExchange(e.Name) {
			t.Errorf("record exchange %s in the topology", e.Name)
		}
	}
}

func recordArgs(t *testing.T, r topology.Record) topology.Args {
	t.Helper()
	text, err := definitions.EncodeRecord(r)
	if err != nil {
		t.Fatal(err)
	}
	return topology.Args{definitions.RecordArgument: text}
}
