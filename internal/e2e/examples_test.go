package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/definitions"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/render"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

func TestMain(m *testing.M) { brokertest.Main(m) }

// repoRoot is the module root, seen from this package's directory (where go
// test runs the test binary).
const repoRoot = "../.."

// exampleGlobs find the example specs; every match is tested.
var exampleGlobs = []string{"examples/*.yaml", "examples/presets/*.yaml"}

// Scaled delays. Delays that share wait queues are mapped, in order, to
// firstDelay, firstDelay+delayStep, ...: distinct delays stay distinct and
// far enough apart that a message routed to the wrong wait queue comes back
// measurably early. The outbox preset names its wait queues in whole
// seconds, so its delays become 1s, 2s, 3s, ...
const (
	firstDelay       = 100 * time.Millisecond
	delayStep        = 50 * time.Millisecond
	outboxFirstDelay = time.Second
	outboxDelayStep  = time.Second
)

// Timing of a returning delivery: never more than early before its
// scheduled delay (clock granularity): an early delivery is a wrong wait
// queue or TTL, whatever the load. How late it may come is a timing goal,
// measured by BenchmarkReturnLateness, not asserted: on an idle machine
// returns are a few milliseconds late, but a quorum queue expires and
// dead-letters through raft log writes, and on a loaded machine returns have
// been seen 1.85s late. Which wait queue a retry went through, and so its
// delay, is pinned exactly by the x-death check, and the wait queue's TTL by
// checkWaitQueues.
const (
	early = 20 * time.Millisecond
	// lateness is how late past its delay a delivery comes back on a quiet
	// machine (tens of milliseconds). The test waits waitguard.For(lateness)
	// past the delay (its 30 s floor is over 10 times the latest return
	// seen on a loaded machine) before it gives up on the delivery and
	// reports where the message is.
	lateness = 100 * time.Millisecond
	// deadLettering is what the broker needs on a quiet machine to
	// dead-letter a message (or take back an unacked one) so that counts
	// and basic.get see it: milliseconds (at most 1.1 s seen on a busy
	// machine). expectDepths and getOne wait waitguard.For(deadLettering).
	deadLettering = 100 * time.Millisecond
)

func exampleFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, g := range exampleGlobs {
		m, err := filepath.Glob(filepath.Join(repoRoot, g))
		if err != nil {
			t.Fatalf("glob %s: %v", g, err)
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Fatalf("no example specs match %v under %s", exampleGlobs, repoRoot)
	}
	return files
}

// exampleName is a subtest name: the path under examples/ without ".yaml",
// with "/" as "-" ("spring", "presets-spring").
func exampleName(path string) string {
	rel, err := filepath.Rel(filepath.Join(repoRoot, "examples"), path)
	if err != nil {
		rel = filepath.Base(path)
	}
	return strings.ReplaceAll(strings.TrimSuffix(filepath.ToSlash(rel), ".yaml"), "/", "-")
}

// TestExamples imports every example's definitions into a fresh vhost and
// drives one message through each of its work queues' retry chains.
func TestExamples(t *testing.T) {
	b := brokertest.Get(t) // start the node before the subtests fan out
	// Checked after every parallel subtest has finished.
	b.CheckNoDeadLetterCycle(t)
	for _, path := range exampleFiles(t) {
		t.Run(exampleName(path), func(t *testing.T) {
			t.Parallel()
			x := setUpExample(t, b, path)
			for _, q := range x.file.Spec.Queues {
				t.Run(q.Name, func(t *testing.T) { x.driveChain(t, q) })
			}
			if q, ok := x.firstNativeWithDLQ(); ok {
				t.Run("reject "+q.Name, func(t *testing.T) { x.rejectIntoDLQ(t, q) })
			}
		})
	}
}

// example is one example spec, loaded into a vhost of its own.
type example struct {
	b     *brokertest.Broker
	vhost string
	file  *spec.File        // parsed, vhost replaced, delays scaled
	topo  topology.Topology // spec.Expand(file)
	live  topology.Topology // read back from the broker after the import
	conn  *amqp.Connection
}

var vhostLine = regexp.MustCompile(`(?m)^vhost:[ \t]*/[ \t]*(#.*)?$`)

func setUpExample(t *testing.T, b *brokertest.Broker, path string) *example {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	vhost := b.NewVhost(t)
	if n := len(vhostLine.FindAllIndex(data, -1)); n != 1 {
		t.Fatalf("%s: found %d lines \"vhost: /\", want 1 to point at the test's vhost", path, n)
	}
	data = vhostLine.ReplaceAll(data, []byte(fmt.Sprintf("vhost: %q", vhost)))
	file, err := spec.Parse(path, data)
	if err != nil {
		t.Fatalf("parse %s with vhost %q:\n%v", path, vhost, err)
	}
	if file.Spec.Vhost != vhost {
		t.Fatalf("%s: parsed vhost %q, want %q", path, file.Spec.Vhost, vhost)
	}
	scaleDelays(file)
	for _, q := range file.Spec.Queues {
		var sched []string
		for _, s := range file.Spec.Schedule(q)[1:] {
			sched = append(sched, fmt.Sprintf("%s via %s", render.HumanDuration(s.Delay), s.Via))
		}
		t.Logf("%s: scaled schedule: %s", q.Name, strings.Join(sched, ", "))
	}
	x := &example{b: b, vhost: vhost, file: file, topo: spec.Expand(file)}
	x.importDefinitions(t)
	x.checkExport(t)
	x.conn = b.Dial(t, vhost)
	return x
}

// scaleDelays rewrites every queue's retry policy in f into an explicit list
// of short delays, keeping the order of the delays and which of them are
// equal: delays that share wait queues (all but the outbox preset's) are
// ranked across the whole file, so two queues whose delays shared a wait
// queue still share one, and distinct delays stay distinct.
func scaleDelays(f *spec.File) {
	var shared []time.Duration
	for _, q := range f.Spec.Queues {
		if q.Preset != spec.PresetOutbox {
			shared = append(shared, q.Retry.Delays()...)
		}
	}
	sharedScale := rankScale(shared, firstDelay, delayStep)
	for i := range f.Spec.Queues {
		q := &f.Spec.Queues[i]
		scale := sharedScale
		if q.Preset == spec.PresetOutbox {
			scale = rankScale(q.Retry.Delays(), outboxFirstDelay, outboxDelayStep)
		}
		scaled := []time.Duration{}
		for _, d := range q.Retry.Delays() {
			scaled = append(scaled, scale[d])
		}
		q.Retry = spec.RetryPolicy{Kind: "delays", Explicit: scaled}
	}
}

// rankScale maps the i-th smallest distinct delay of ds to first + i*step.
func rankScale(ds []time.Duration, first, step time.Duration) map[time.Duration]time.Duration {
	distinct := slices.Compact(slices.Sorted(slices.Values(ds)))
	m := make(map[time.Duration]time.Duration, len(distinct))
	for i, d := range distinct {
		m[d] = first + time.Duration(i)*step
	}
	return m
}

// importDefinitions posts the rendered definitions to the management API,
// as `rmqtopo render definitions | curl -X POST` would.
func (x *example) importDefinitions(t *testing.T) {
	t.Helper()
	var doc bytes.Buffer
	if err := render.Definitions(&doc, x.topo); err != nil {
		t.Fatalf("render definitions: %v", err)
	}
	status, body := x.mgmt(t, http.MethodPost, "/api/definitions", &doc)
	if status/100 != 2 {
		t.Fatalf("POST /api/definitions: HTTP %d: %s\ndefinitions:\n%s", status, body, doc.String())
	}
}

// checkExport reads the vhost's definitions back and compares them with the
// topology that was imported.
func (x *example) checkExport(t *testing.T) {
	t.Helper()
	status, body := x.mgmt(t, http.MethodGet, "/api/definitions/"+url.PathEscape(x.vhost), nil)
	if status != http.StatusOK {
		t.Fatalf("GET /api/definitions/%s: HTTP %d: %s", x.vhost, status, body)
	}
	doc, err := definitions.Decode(body, x.vhost)
	if err != nil {
		t.Fatal(err)
	}
	x.live = doc.ToTopology(x.vhost)
	if diff := cmp.Diff(x.topo, x.live, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("the vhost's exported definitions differ from the imported topology (-want +got):\n%s", diff)
	}
}

func (x *example) mgmt(t *testing.T, method, path string, body io.Reader) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, x.b.MgmtURL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(x.b.User, x.b.Password)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	// A hang guard: a definitions import or export takes well under a
	// second alone, and took 9 s with every example importing at once on a
	// busy machine.
	client := &http.Client{Timeout: waitguard.For(10 * time.Second)}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	return resp.StatusCode, data
}

func (x *example) firstNativeWithDLQ() (spec.Queue, bool) {
	for _, q := range x.file.Spec.Queues {
		if q.Preset == spec.PresetNone && q.DLQ {
			return q, true
		}
	}
	return spec.Queue{}, false
}

// depths returns the number of ready messages in every queue of the vhost
// that holds any, read with passive declares (exact and immediate, unlike
// the management API's statistics).
func (x *example) depths(t *testing.T) map[string]int {
	t.Helper()
	ch, err := x.conn.Channel()
	if err != nil {
		t.Fatalf("open channel: %v", err)
	}
	defer ch.Close()
	got := map[string]int{}
	for _, q := range x.topo.Queues {
		st, err := ch.QueueDeclarePassive(q.Name, q.Durable, q.AutoDelete, false, false, nil)
		if err != nil {
			t.Fatalf("passive declare of queue %q: %v", q.Name, err)
		}
		if st.Messages != 0 {
			got[q.Name] = st.Messages
		}
	}
	return got
}

// expectDepths waits for the vhost's message counts to become want
// (dead-lettering is asynchronous); if they do not within a hang guard, it
// fails the test with the difference.
func (x *example) expectDepths(t *testing.T, want map[string]int, what string) bool {
	t.Helper()
	deadline := waitguard.Deadline(deadLettering)
	for {
		got := x.depths(t)
		if cmp.Equal(want, got, cmpopts.EquateEmpty()) {
			return true
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: messages per queue (-want +got):\n%s", what, cmp.Diff(want, got, cmpopts.EquateEmpty()))
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// purge empties every queue of the vhost, so that one failed chain does not
// fail the next.
func (x *example) purge(t *testing.T) {
	ch, err := x.conn.Channel()
	if err != nil {
		t.Logf("purge: open channel: %v", err)
		return
	}
	defer ch.Close()
	for _, q := range x.topo.Queues {
		if _, err := ch.QueuePurge(q.Name, false); err != nil {
			t.Logf("purge %q: %v", q.Name, err)
			return
		}
	}
}

// getOne takes the one message expected in queue, waiting for
// asynchronous dead-lettering (within a hang guard), and acks it.
func (x *example) getOne(t *testing.T, queue string) (amqp.Delivery, bool) {
	t.Helper()
	ch, err := x.conn.Channel()
	if err != nil {
		t.Fatalf("open channel: %v", err)
	}
	defer ch.Close()
	deadline := waitguard.Deadline(deadLettering)
	for {
		d, ok, err := ch.Get(queue, false)
		if err != nil {
			t.Fatalf("basic.get from %q: %v", queue, err)
		}
		if ok {
			if err := d.Ack(false); err != nil {
				t.Fatalf("ack message from %q: %v", queue, err)
			}
			return d, true
		}
		if time.Now().After(deadline) {
			t.Errorf("no message in %q", queue)
			return amqp.Delivery{}, false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// death is the first (most recent) entry of a message's x-death header.
type death struct {
	Queue, Reason, Exchange string
	RoutingKeys             []string
	Count                   int64
	Entries                 int // entries in x-death
}

func firstDeath(h amqp.Table) (death, bool) {
	list, ok := h["x-death"].([]any)
	if !ok || len(list) == 0 {
		return death{}, false
	}
	e, _ := list[0].(amqp.Table)
	dd := death{Entries: len(list)}
	dd.Queue, _ = e["queue"].(string)
	dd.Reason, _ = e["reason"].(string)
	dd.Exchange, _ = e["exchange"].(string)
	dd.Count, _ = e["count"].(int64)
	if keys, ok := e["routing-keys"].([]any); ok {
		for _, k := range keys {
			s, _ := k.(string)
			dd.RoutingKeys = append(dd.RoutingKeys, s)
		}
	}
	return dd, true
}

// rejectIntoDLQ checks that a delivery a consumer rejects without requeue
// is dead-lettered by the work queue itself into its DLQ.
func (x *example) rejectIntoDLQ(t *testing.T, q spec.Queue) {
	if !x.expectDepths(t, nil, "before the test") {
		x.purge(t)
		t.FailNow()
	}
	c := x.newChain(t, q)
	defer x.cleanUpAfter(t, c)
	if c.publish("", q.Name, amqp.Publishing{}) {
		t.Fatalf("the publish to %q was returned unroutable", q.Name)
	}
	d := c.receive(0, time.Now())
	if err := d.Reject(false); err != nil {
		t.Fatalf("reject: %v", err)
	}
	c.close()
	dlq := contract.DeadLetterQueue(q.Name)
	x.expectDepths(t, map[string]int{dlq: 1}, "after basic.reject(requeue=false)")
	m, ok := x.getOne(t, dlq)
	if !ok {
		return
	}
	if m.MessageId != c.id {
		t.Errorf("the DLQ holds message %q, want %q", m.MessageId, c.id)
	}
	got, _ := firstDeath(m.Headers)
	want := death{Queue: q.Name, Reason: "rejected", Exchange: "", RoutingKeys: []string{q.Name}, Count: 1, Entries: 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("x-death of the rejected message (-want +got):\n%s", diff)
	}
}

// TestScaleDelays checks the scaling itself on every example: within a
// file, any two delays compare the same way (less, equal, greater) before
// and after scaling, except that the outbox preset's delays are compared
// only within their queue; outbox delays are whole seconds.
func TestScaleDelays(t *testing.T) {
	type delay struct {
		queue  int
		outbox bool
		d      time.Duration
	}
	for _, path := range exampleFiles(t) {
		t.Run(exampleName(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			file, err := spec.Parse(path, data)
			if err != nil {
				t.Fatal(err)
			}
			collect := func() []delay {
				var out []delay
				for i, q := range file.Spec.Queues {
					for _, d := range q.Retry.Delays() {
						out = append(out, delay{i, q.Preset == spec.PresetOutbox, d})
					}
				}
				return out
			}
			before := collect()
			scaleDelays(file)
			after := collect()
			if len(before) != len(after) {
				t.Fatalf("%d delays before scaling, %d after", len(before), len(after))
			}
			for i := range before {
				if after[i].outbox && after[i].d%time.Second != 0 {
					t.Errorf("outbox delay %v scaled to %v, not whole seconds", before[i].d, after[i].d)
				}
				if !after[i].outbox && (after[i].d < firstDelay || after[i].d > 10*time.Second) {
					t.Errorf("delay %v scaled to %v", before[i].d, after[i].d)
				}
				for j := range before {
					if (before[i].outbox || before[j].outbox) && before[i].queue != before[j].queue {
						continue
					}
					if b, a := cmp3(before[i].d, before[j].d), cmp3(after[i].d, after[j].d); a != b {
						t.Errorf("%v vs %v scaled to %v vs %v: order %d became %d",
							before[i].d, before[j].d, after[i].d, after[j].d, b, a)
					}
				}
			}
		})
	}
}

func cmp3(a, b time.Duration) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
