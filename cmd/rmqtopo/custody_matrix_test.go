package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	rtry "github.com/rmqtopo/rmqtopo/retry"
)

// The conservation matrix (issue 46, docs/testing.md): for each layout,
// each place a message can be and each change that removes or replaces a
// queue, a test puts messages with known ids there, applies the change
// (plain, and with migrate: true where the change replaces a queue), and
// then finds every id again: in a queue of the vhost (delivered back into
// the work queue, in the DLQ or parking lot, still waiting or held). An
// apply may refuse (exit 4) or succeed; either way no id may be missing.
// That is the checker, Jepsen's way: a plain apply that went ahead where
// messages were at stake shows up as a lost id.
//
// The cases are generated from the tables below. make test runs a sample
// that covers every layout × change pair and every place at least once
// (custodySampled); RMQTOPO_TEST_CUSTODY=all (make test-custody) runs all.

// custodyLayout is a layout of the work queue "cw" under test.
type custodyLayout struct {
	name, yaml string
	// from is the wait path a retry takes (publishRetryOf); empty for
	// native, where the broker holds retries inside the queue.
	from   string
	native bool
	// delays is the work queue's schedule before any change; empty for
	// custodyBaseDelays.
	delays string
}

var custodyLayouts = []custodyLayout{
	{"per-attempt", "layout: per-attempt\n    return_queue: false", "per-attempt", false, ""},
	{"shared", "layout: shared\n    return_queue: false", "shared", false, ""},
	{"return-queue", "layout: shared\n    return_queue: true", "return-queue", false, ""},
	{"levels", "layout: levels\n    return_queue: false", "levels", false, ""},
	{"native", "layout: native", "", true, ""},
	// A schedule the broker does not compute: the binding shape, retried
	// over AMQP 1.0, whose schedule changes in place.
	{"native-binding", "layout: native", "", true, "2s, 5s"},
}

// custodySpec is the spec of a case, before or after its change.
type custodySpec struct {
	name    string // the work queue's name: "cw", until a rename
	present bool   // the work queue is in the spec (prune takes it out)
	typ     string
	layout  custodyLayout
	delays  string
	dlq     bool
	migrate bool
}

// custodyDelay is the first retry's delay, which every waiting message
// is due after; custodyLongest the longest delay any case has.
const (
	custodyDelay   = 2 * time.Second
	custodyLongest = 6 * time.Second
)

// custodyBaseDelays is the schedule a case starts from, but where its
// layout has its own; the schedule change lengthens the last delay by 1s.
const custodyBaseDelays = "2s, 4s"

func custodyBase(l custodyLayout) custodySpec {
	delays := l.delays
	if delays == "" {
		delays = custodyBaseDelays
	}
	return custodySpec{name: "cw", present: true, typ: "quorum", layout: l, delays: delays, dlq: true}
}

// longerLast is delays ("2s, 4s") with its last delay 1s longer.
func longerLast(delays string) string {
	words := strings.Split(delays, ", ")
	last, err := time.ParseDuration(words[len(words)-1])
	if err != nil {
		panic(err)
	}
	words[len(words)-1] = (last + time.Second).String()
	return strings.Join(words, ", ")
}

// yaml is the spec's text; a second queue keeps it from being empty when
// "cw" leaves it.
func (c custodySpec) yaml() string {
	var b strings.Builder
	b.WriteString("name: custody\nqueues:\n  - {name: keep, type: quorum, layout: shared, retry: {delays: [1s]}}\n")
	if c.present {
		fmt.Fprintf(&b, "  - name: %s\n    type: %s\n    %s\n    dlq: %t\n    parking_lot: %t\n    migrate: %t\n    retry: {delays: [%s]}\n",
			c.name, c.typ, c.layout.yaml, c.dlq, c.dlq, c.migrate, c.delays)
	}
	return b.String()
}

// custodyChange is a change that removes or replaces a queue of the
// topology.
type custodyChange struct {
	name  string
	fits  func(custodyLayout) bool
	after func(custodySpec) custodySpec
	prune bool
	// rename: the queue is renamed in the spec and its messages moved the
	// way docs/plan-apply.md says ("Renaming a queue"): apply, rmqtopo
	// move old --to new, apply --prune.
	rename bool
}

func anyLayout(custodyLayout) bool { return true }

var custodyChanges = []custodyChange{
	{name: "schedule", fits: anyLayout, after: func(c custodySpec) custodySpec { c.delays = longerLast(c.delays); return c }},
	{name: "type", fits: func(l custodyLayout) bool { return !l.native }, after: func(c custodySpec) custodySpec { c.typ = "classic"; return c }},
	{name: "dlq-off", fits: anyLayout, after: func(c custodySpec) custodySpec { c.dlq = false; return c }},
	{name: "layout", fits: anyLayout, after: func(c custodySpec) custodySpec { c.layout = nextLayout(c.layout); return c }},
	{name: "prune", fits: anyLayout, after: func(c custodySpec) custodySpec { c.present = false; return c }, prune: true},
	{name: "rename", fits: anyLayout, after: func(c custodySpec) custodySpec { c.name = "cw2"; return c }, rename: true},
}

// nextLayout is the layout a layout change moves to: shared from any
// other, per-attempt from shared.
func nextLayout(l custodyLayout) custodyLayout {
	to := "shared"
	if l.name == "shared" {
		to = "per-attempt"
	}
	i := slices.IndexFunc(custodyLayouts, func(c custodyLayout) bool { return c.name == to })
	return custodyLayouts[i]
}

// custodyPlace puts messages with known ids in one place of a layout.
type custodyPlace struct {
	name string
	fits func(custodyLayout) bool
	put  func(t *testing.T, r *custodyRun, ids []string)
}

// custodyPlaces are the places; a retry whose connection dies between
// publish and confirmation is in custody_confirm_test.go.
var custodyPlaces = append([]custodyPlace{
	{"ready", anyLayout, func(t *testing.T, r *custodyRun, ids []string) { r.publish(t, "", "cw", ids) }},
	{"unacknowledged", anyLayout, func(t *testing.T, r *custodyRun, ids []string) { r.holdUnacked(t, ids) }},
	{"waiting", notNative, func(t *testing.T, r *custodyRun, ids []string) {
		for _, id := range ids {
			publishRetryOf(t, r.conn, "cw", r.layout.from, custodyDelay, amqp.Publishing{MessageId: id, Body: []byte(id)})
		}
	}},
	{"delayed", func(l custodyLayout) bool { return l.native }, func(t *testing.T, r *custodyRun, ids []string) {
		r.publish(t, "", "cw", ids)
		if r.layout.delays != "" {
			r.failOnceModified(t, ids) // the binding shape: a basic.reject is not delayed
			return
		}
		rejectAll(t, r.conn, "cw", len(ids))
	}},
	{"dlq", anyLayout, func(t *testing.T, r *custodyRun, ids []string) { r.publish(t, "", contract.DeadLetterQueue("cw"), ids) }},
	{"parking-lot", anyLayout, func(t *testing.T, r *custodyRun, ids []string) { r.publish(t, "", contract.ParkingLotQueue("cw"), ids) }},
}, custodyConfirmPlaces...)

// custodyCase is one cell of the matrix.
type custodyCase struct {
	layout custodyLayout
	place  custodyPlace
	change custodyChange
	mode   string // "plain" or "migrate"
}

func (c custodyCase) name() string {
	return c.layout.name + "/" + c.place.name + "/" + c.change.name + "/" + c.mode
}

// custodyCases generates every case of the matrix for places.
func custodyCases(places []custodyPlace) []custodyCase {
	var out []custodyCase
	for _, l := range custodyLayouts {
		for _, ch := range custodyChanges {
			if !ch.fits(l) {
				continue
			}
			for _, p := range places {
				if !p.fits(l) {
					continue
				}
				for _, mode := range []string{"plain", "migrate"} {
					if mode == "migrate" && (ch.prune || ch.rename) {
						continue // a queue that leaves the spec has nothing to migrate into
					}
					out = append(out, custodyCase{layout: l, place: p, change: ch, mode: mode})
				}
			}
		}
	}
	return out
}

// custodySampled picks, for make test, every layout × change pair in both
// modes with one place each, rotating through the places so that each
// is covered, plus every place of the native schedule change (issue 46's
// loss).
func custodySampled(all []custodyCase) []custodyCase {
	var out []custodyCase
	seen := map[string]int{}
	for _, c := range all {
		pair := c.layout.name + "/" + c.change.name + "/" + c.mode
		fitting := 0
		for _, p := range custodyPlaces {
			if p.fits(c.layout) {
				fitting++
			}
		}
		n := seen[pair]
		seen[pair]++
		pick := (len(seen) + len(c.layout.name)) % fitting
		if n == pick || c.layout.native && c.change.name == "schedule" {
			out = append(out, c)
		}
	}
	return out
}

// TestConservationMatrix runs the matrix's cases (see above).
func TestConservationMatrix(t *testing.T) {
	t.Parallel()
	o := newOnline(t)
	cases := custodyCases(custodyPlaces)
	if os.Getenv("RMQTOPO_TEST_CUSTODY") != "all" {
		cases = custodySampled(cases)
	}
	native := nativeBroker(t, o)
	for _, c := range cases {
		if c.layout.native && !native {
			continue
		}
		t.Run(c.name(), func(t *testing.T) {
			t.Parallel()
			runCustody(t, newOnline(t), c)
		})
	}
}

// nativeBroker reports whether the test broker runs the native layout.
func nativeBroker(t *testing.T, o *online) bool {
	t.Helper()
	ok := true
	t.Run("probe", func(t *testing.T) {
		defer func() { ok = !t.Skipped() }()
		needsNative(t, o)
	})
	return ok
}

// custodyRun is a case being run.
type custodyRun struct {
	o      *online
	conn   *amqp.Connection
	layout custodyLayout
	hold   *amqp.Channel // a consumer's channel holding deliveries unacknowledged
	// release, when set, undoes what kept the messages in their place, once
	// the apply is done (custody_held_test.go).
	release func(t *testing.T)
	// extra are ids the place put besides the case's own, to account for.
	extra []string
	// stillHeld, when set, reports whether n ids not found are still held
	// where the broker cannot give them back in the test's time.
	stillHeld func(t *testing.T, o *online, n int) bool
}

// runCustody runs case c in o's vhost.
func runCustody(t *testing.T, o *online, c custodyCase) {
	before := custodyBase(c.layout)
	after := c.change.after(before)
	after.migrate = c.mode == "migrate" && after.present
	o.must(t, 0, "apply", "--auto-approve", o.spec(t, "before.yaml", before.yaml()))
	r := &custodyRun{o: o, conn: o.b.Dial(t, o.vhost), layout: c.layout}
	ids := []string{c.place.name + "-1", c.place.name + "-2", c.place.name + "-3"}
	c.place.put(t, r, ids)

	stdout, stderr, code := r.change(t, c.change, before, after)
	if r.hold != nil {
		r.hold.Close() // the consumer goes: what it held is requeued, if its queue is still there
	}
	if r.release != nil {
		r.release(t)
	}
	if missing := r.account(t, append(ids, r.extra...)); len(missing) > 0 && (r.stillHeld == nil || !r.stillHeld(t, o, len(missing))) {
		t.Errorf("lost %v after the apply (exit %d)\nstdout:\n%s\nstderr:\n%s\nqueues: %s", missing, code, stdout, stderr,
			o.api(t, http.MethodGet, "/api/queues/"+url.PathEscape(o.vhost)+"?columns=name,messages,messages_ready,messages_unacknowledged,messages_dlx", ""))
	}
}

// change applies the case's change from before to after and returns the
// output of its commands and the last one's exit code: 0 made, 4 refused,
// 1 stopped on the way (a migration that keeps a queue whose consumer
// holds deliveries). The ids tell whether it was safe.
func (r *custodyRun) change(t *testing.T, ch custodyChange, before, after custodySpec) (stdout, stderr string, code int) {
	t.Helper()
	spec := r.o.spec(t, "after.yaml", after.yaml())
	steps := [][]string{{"apply", "--auto-approve", spec}}
	switch {
	case ch.prune:
		steps[0] = append(steps[0], "--prune")
	case ch.rename:
		steps = append(steps, []string{"move", before.name, "--to", after.name, "--vhost", r.o.vhost},
			[]string{"apply", "--auto-approve", "--prune", spec})
	}
	for _, args := range steps {
		out, errs, exit := rmqtopo(t, "", append(args, r.o.conn()...)...)
		t.Logf("%s exit %d: %s", args[0], exit, lastLine(errs))
		stdout, stderr, code = stdout+out, stderr+errs, exit
	}
	return stdout, stderr, code
}

func (r *custodyRun) publish(t *testing.T, exchange, key string, ids []string) {
	t.Helper()
	for _, id := range ids {
		brokertest.PublishConfirmed(t, r.conn, exchange, key, amqp.Publishing{DeliveryMode: amqp.Persistent, MessageId: id, Body: []byte(id)})
	}
}

// failOnceModified has retry.Consume take the work queue's messages ids
// and fail each once: on the binding shape the helper retries over AMQP
// 1.0 (modified, with a delivery time custodyDelay on), and the broker
// holds each inside the queue. It returns once every id failed.
func (r *custodyRun) failOnceModified(t *testing.T, ids []string) {
	t.Helper()
	var mu sync.Mutex
	failed := map[string]bool{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- rtry.Consume(ctx, rtry.DialURL(r.o.b.AMQPURLFor(r.o.vhost), amqp.Config{}), "cw",
			func(hctx context.Context, d amqp.Delivery) error {
				mu.Lock()
				again := failed[d.MessageId]
				failed[d.MessageId] = true
				mu.Unlock()
				if again { // back before the consumer went: give it back unsettled
					<-hctx.Done()
					return hctx.Err()
				}
				return errors.New("fails once")
			})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	for end := time.Now().Add(waitguard.For(10 * time.Second)); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(failed)
		mu.Unlock()
		if n == len(ids) {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("retry.Consume failed %d of %d messages", n, len(ids))
		}
	}
}

// holdUnacked publishes ids to the work queue and has a consumer take
// them without acknowledging any: they are unacknowledged during the
// apply.
func (r *custodyRun) holdUnacked(t *testing.T, ids []string) {
	t.Helper()
	r.publish(t, "", "cw", ids)
	ch, err := r.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Qos(len(ids), 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume("cw", "holder", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	guard := time.After(waitguard.For(5 * time.Second))
	for range ids {
		select {
		case <-ds:
		case <-guard:
			t.Fatal("the work queue did not deliver the messages to hold")
		}
	}
	r.hold = ch
}

// account takes every message of every queue of the vhost, until it has
// seen each of ids or the longest delay (and a guard) has passed, and
// returns the ids it never saw.
func (r *custodyRun) account(t *testing.T, ids []string) []string {
	t.Helper()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	ch, err := r.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	deadline := time.Now().Add(custodyLongest + waitguard.For(5*time.Second))
	for len(want) > 0 && time.Now().Before(deadline) {
		for _, q := range r.queues(t) {
			for {
				d, ok, err := ch.Get(q, true)
				if err != nil {
					t.Fatalf("get from %s: %v", q, err)
				}
				if !ok {
					break
				}
				delete(want, d.MessageId)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return slices.Sorted(maps.Keys(want))
}

// queues lists the vhost's queue names.
func (r *custodyRun) queues(t *testing.T) []string {
	t.Helper()
	var qs []struct{ Name string }
	if err := json.Unmarshal(r.o.api(t, http.MethodGet, "/api/queues/"+url.PathEscape(r.o.vhost)+"?columns=name", ""), &qs); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(qs))
	for i, q := range qs {
		out[i] = q.Name
	}
	return out
}

// lastLine is s's last non-empty line: an apply's error, or its summary.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
