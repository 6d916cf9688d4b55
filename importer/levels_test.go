package importer_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/importer"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

// TestImportLevels: a vhost with a delay ladder imports back into a spec
// with its levels key, wait_queue_type and layout: levels queues, beside
// queues of other layouts and raw queues, which the ladder also delivers
// to.
func TestImportLevels(t *testing.T) {
	want := mustParse(t, `version: 1
vhost: v
wait_queue_type: classic
levels: {resolution: 250ms, max: 10m}
queues:
  - {name: a, type: quorum, retry: {exponential: {initial: 1s, factor: 2, attempts: 4, jitter: full}}, layout: levels, immediate_retries: 2}
  - {name: b, retry: {delays: [1s, 5s]}}
  - {name: c, retry: {delays: [2s]}, layout: per-attempt}
  - {name: r, raw: true}
`)
	res := mustImport(t, "v", want)
	if diff := cmp.Diff(want, spec.Expand(res.File)); diff != "" {
		t.Errorf("(-want +got):\n%s\n%s", diff, res.YAML)
	}
	y := string(res.YAML)
	for _, s := range []string{"levels: {resolution: 250ms, max: 17m}", "wait_queue_type: classic",
		"immediate_retries: 2\n    retry: {fixed: {delay: 1s, attempts: 4}}\n    layout: levels", "jitter is left"} {
		if !strings.Contains(y, s) {
			t.Errorf("the spec lacks %q:\n%s", s, y)
		}
	}
	if res.Recognised != 3 || len(res.Skipped) != 0 {
		t.Errorf("recognised %d, skipped %v:\n%s", res.Recognised, res.Skipped, y)
	}
}

// TestImportLevelsWithoutMarker: a levels queue applied before levels
// queues had a marker (contract.LevelsMarker) is still recognised; its
// spec adds the marker.
func TestImportLevelsWithoutMarker(t *testing.T) {
	want := mustParse(t, `version: 1
vhost: v
queues:
  - {name: a, retry: {exponential: {initial: 1s, factor: 2, attempts: 4}}, layout: levels}
`)
	live := want
	live.Exchanges = slices.DeleteFunc(slices.Clone(want.Exchanges), func(e topology.Exchange) bool { return e.Name == contract.LevelsMarker("a") })
	if len(live.Exchanges) != len(want.Exchanges)-1 {
		t.Fatalf("the expansion has no marker %q", contract.LevelsMarker("a"))
	}
	res := mustImport(t, "v", live)
	if res.Recognised != 1 || len(res.Skipped) != 0 {
		t.Errorf("recognised %d, skipped %v:\n%s", res.Recognised, res.Skipped, res.YAML)
	}
	if diff := cmp.Diff(want, spec.Expand(res.File)); diff != "" {
		t.Errorf("(-want +got):\n%s\n%s", diff, res.YAML)
	}
}

// TestImportLevelsDefaultLadder: a ladder nothing retries through (a
// service only schedules with it) is still a levels key, and the default
// ladder is written with the default max.
func TestImportLevelsDefaultLadder(t *testing.T) {
	want := mustParse(t, "version: 1\nvhost: v\nlevels: {}\nqueues: [{name: q, raw: true}]\n")
	res := mustImport(t, "v", want)
	if diff := cmp.Diff(want, spec.Expand(res.File)); diff != "" {
		t.Errorf("(-want +got):\n%s\n%s", diff, res.YAML)
	}
	if !strings.Contains(string(res.YAML), "levels: {resolution: 100ms, max: 168h}") {
		t.Errorf("want the default ladder:\n%s", res.YAML)
	}
}

// TestImportLevelsRetiredOrRaw: a second ladder, left by a change of the
// levels key, is left out and listed; a ladder a spec cannot reproduce (a
// queue without its delivery binding) is written raw, with the other
// ladder, and everything still round-trips, less a's rmqtopo-managed
// policies, listed as not imported.
func TestImportLevelsRetiredOrRaw(t *testing.T) {
	live := mustParse(t, "version: 1\nvhost: v\nlevels: {resolution: 1s, max: 1m}\nqueues: [{name: a, retry: {delays: [5s]}, layout: levels, message_ttl: 1h}, {name: b, raw: true}]\n")
	old := mustParse(t, "version: 1\nvhost: v\nlevels: {resolution: 100ms, max: 1m}\nqueues: [{name: b, raw: true}]\n")
	live.Exchanges = append(live.Exchanges, old.Exchanges...)
	for _, q := range old.Queues {
		if q.Name != "b" {
			live.Queues = append(live.Queues, q)
		}
	}
	live.Bindings = append(live.Bindings, old.Bindings...)
	live.Sort()
	res := mustImport(t, "v", live)
	if diff := cmp.Diff(without(live, res.Skipped), spec.Expand(res.File)); diff != "" {
		t.Errorf("two ladders (-want +got):\n%s\n%s", diff, res.YAML)
	}
	if res.Recognised != 1 || !strings.Contains(string(res.YAML), "levels: {resolution: 1s, max: 1m}") {
		t.Errorf("want the ladder a retries through, and a, recognised:\n%s", res.YAML)
	}
	// 10 levels, 10 stages, deliver, dlx, dlq: 23 objects; 10×13/2 stage
	// bindings, dlx→dlq and deliver→b: 67 bindings.
	if n := len(res.Skipped); n != 23+67 || !strings.Contains(res.Skipped[0].Reason, "retired delay ladder") {
		t.Errorf("skipped %d objects, want the 100ms ladder's 90: %v", n, res.Skipped)
	}

	var bs []topology.Binding
	for _, b := range live.Bindings {
		if !(b.Destination == "b" && strings.HasSuffix(b.Source, "1s.6.deliver")) {
			bs = append(bs, b)
		}
	}
	live.Bindings = bs
	res = mustImport(t, "v", live)
	if diff := cmp.Diff(without(live, res.Skipped), spec.Expand(res.File)); diff != "" {
		t.Errorf("no delivery binding to b (-want +got):\n%s\n%s", diff, res.YAML)
	}
	// a is written raw: its policies are rmqtopo's, which a spec cannot
	// declare as its own.
	want := []string{`policy "rmqtopo.queue.a" in vhost "v"`}
	if diff := cmp.Diff(want, skippedManaged(res)); diff != "" {
		t.Errorf("no delivery binding to b: skipped (-want +got):\n%s", diff)
	}
	// The reason says which queue it is for, why that is raw, and what
	// the spec loses.
	for _, w := range []string{`queue "a" is written raw`, `delay ladder is written raw: it does not deliver to queue "b"`, "message-ttl=3600000"} {
		if !strings.Contains(res.Skipped[0].Reason, w) {
			t.Errorf("the reason lacks %q: %s", w, res.Skipped[0].Reason)
		}
	}
	if res.Recognised != 0 || strings.Contains(string(res.YAML), "levels: {resolution: 1s") {
		t.Errorf("want the 1s ladder and a raw:\n%s", res.YAML)
	}
}

func mustImport(t *testing.T, vhost string, live topology.Topology) *importer.Result {
	t.Helper()
	res, err := importer.Import(importer.Input{Vhost: vhost, Topology: live, Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestImportLevelsWithReturnQueues: the ladder's delivery exchange binds a
// queue with a return queue through its return queue. A levels queue
// beside a return-queue queue, and a queue that is both, are recognised
// with their policies' attributes, and the ladder is a levels key.
func TestImportLevelsWithReturnQueues(t *testing.T) {
	for name, src := range map[string]string{
		"beside": `  - {name: email.send, type: quorum, delivery_limit: 5, retry: {exponential: {initial: 1s, factor: 2, attempts: 4, jitter: full}}, layout: levels}
  - {name: sms.send, type: classic, message_ttl: 1h, retry: {fixed: {delay: 3s, attempts: 3}}, return_queue: true}
  - {name: plain, raw: true}
`,
		"both": `  - {name: email.send, type: quorum, delivery_limit: 5, message_ttl: 1h, retry: {fixed: {delay: 1s, attempts: 4}}, layout: levels, return_queue: true}
  - {name: sms.send, retry: {fixed: {delay: 3s, attempts: 3}}, return_queue: true}
`,
	} {
		t.Run(name, func(t *testing.T) {
			want := mustParse(t, "version: 1\nvhost: v\nlevels: {resolution: 1s, max: 1h}\nqueues:\n"+src)
			res := mustImport(t, "v", want)
			if diff := cmp.Diff(want, spec.Expand(res.File)); diff != "" {
				t.Errorf("(-want +got):\n%s\n%s", diff, res.YAML)
			}
			y := string(res.YAML)
			for _, s := range []string{"levels: {resolution: 1s, max: 1h}", "delivery_limit: 5", "message_ttl: 1h", "layout: levels"} {
				if !strings.Contains(y, s) {
					t.Errorf("the spec lacks %q:\n%s", s, y)
				}
			}
			if res.Recognised != 2 || len(res.Skipped) != 0 {
				t.Errorf("recognised %d, skipped %v:\n%s", res.Recognised, res.Skipped, y)
			}
		})
	}
}
