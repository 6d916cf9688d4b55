package spec

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/rabbitmq"
	"github.com/rmqtopo/rmqtopo/topology"
)

func names(t topology.Topology) map[string]bool {
	out := map[string]bool{}
	for _, q := range t.Queues {
		out[q.Name] = true
	}
	for _, e := range t.Exchanges {
		out[e.Name] = true
	}
	return out
}

// TestNativeArgumentsShape: a native queue on the reject route whose spec
// sets no attribute, and so needs no policy of its own, carries its
// schedule in its
// arguments (contract.NativeArguments): no policy, no schedule binding
// (one policy per native queue stalled the management API at 1,000
// queues; see freshShape).
func TestNativeArgumentsShape(t *testing.T) {
	f := mustParse(t, "n.yaml", `version: 1
vhost: v
layout: native
queues:
  - {name: a, type: quorum, retry: {linear: {step: 5s, attempts: 3}}}
`)
	got := Expand(f)
	a, _ := got.Queue("v", "a")
	n, err := contract.ParseNative(a.Arguments)
	want := contract.Native{Route: contract.RouteReject, Delays: []time.Duration{5 * time.Second, 10 * time.Second, 15 * time.Second}, DeliveryLimit: 3}
	if err != nil || !cmp.Equal(want, n) {
		t.Errorf("a's arguments give %+v, %v; want %+v", n, err, want)
	}
	if p, ok := policyOf(got, "v", contract.QueuePolicy("a")); ok {
		t.Errorf("a has a policy %v; want none", p.Definition)
	}
	if _, err := scheduleOf(got, "v", "a"); err == nil {
		t.Error("a has a schedule binding; want none")
	}
}

// TestNativeLayout: layout native, on a queue that has a policy of its
// own anyway (its spec sets an attribute), marks the queue native in its
// arguments and nothing else of its schedule (they are immutable), puts
// the broker's part of the schedule in the queue's policy (a linear
// schedule as delayed-retry-min and -max: the reject route; the delivery
// limit of its retries) and the helper's in its binding from the schedule
// exchange, and creates no retry exchange and no wait queue.
func TestNativeLayout(t *testing.T) {
	f := mustParse(t, "n.yaml", `version: 1
vhost: v
layout: native
queues:
  - {name: a, type: quorum, max_length: 100, retry: {linear: {step: 5s, attempts: 3}}}
  - {name: b, type: quorum, message_ttl: 1h, retry: {exponential: {initial: 1s, factor: 2, attempts: 3, jitter: full}}}
  - {name: c, type: quorum, max_length: 50, immediate_retries: 1, retry: {delays: [2s]}}
`)
	got := Expand(f)
	a, _ := got.Queue("v", "a")
	want := merge(atLeastOnce, topology.Args{"x-queue-type": "quorum", "x-delayed-retry-type": "failed", "x-dead-letter-exchange": "a.dlx"})
	if diff := cmp.Diff(want, a.Arguments); diff != "" {
		t.Errorf("a's arguments (-want +got):\n%s", diff)
	}
	wantPolicy := map[string]topology.Args{
		"a": {"delivery-limit": int64(3), "delayed-retry-min": int64(5000), "delayed-retry-max": int64(15000), "max-length": int64(100)},
		"b": {"delivery-limit": int64(3), "message-ttl": int64(3600000)},
		"c": {"delivery-limit": int64(2), "max-length": int64(50)},
	}
	for q, want := range wantPolicy {
		p, ok := policyOf(got, "v", contract.QueuePolicy(q))
		if !ok || !cmp.Equal(topology.NormalizeArgs(want), p.Definition) {
			t.Errorf("%s's policy %v (%v); want %v", q, p.Definition, ok, want)
		}
	}
	for q, want := range map[string]contract.Native{
		"a": {Route: contract.RouteReject, Delays: []time.Duration{5 * time.Second, 10 * time.Second, 15 * time.Second}, DeliveryLimit: 3},
		"b": {Route: contract.RouteModified, Delays: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, Jitter: true, DeliveryLimit: 3},
		"c": {Route: contract.RouteModified, Delays: []time.Duration{0, 2 * time.Second}, DeliveryLimit: 2},
	} {
		if n, err := scheduleOf(got, "v", q); err != nil || !cmp.Equal(want, n) {
			t.Errorf("%s's schedule binding: %+v, %v; want %+v", q, n, err, want)
		}
		wq, _ := got.Queue("v", q)
		if _, err := contract.ParseNative(wq.Arguments); !errors.Is(err, contract.ErrScheduleApart) {
			t.Errorf("%s: ParseNative %v; want ErrScheduleApart", q, err)
		}
	}
	have := names(got)
	for _, n := range []string{"a.retry", "b.retry", "c.retry", "rmqtopo.wait.5s", "rmqtopo.wait.2s", "a.return"} {
		if have[n] {
			t.Errorf("%s exists; native makes no retry exchange, wait queue or return queue", n)
		}
	}
	for _, n := range []string{"a", "a.dlx", "a.dlq", "b.dlq", "c.dlq"} {
		if !have[n] {
			t.Errorf("%s is missing", n)
		}
	}
	steps := f.Spec.Schedule(f.Spec.Queues[0])
	if len(steps) != 4 || steps[1].Via != "a" || steps[3].OnFailure != "a.dlq" {
		t.Errorf("a's schedule %+v: want 4 deliveries waiting in a itself, then the DLQ", steps)
	}
}

// TestNativeRefusals: what the native layout cannot express is an error
// at the line that asks for it.
func TestNativeRefusals(t *testing.T) {
	cases := map[string]string{
		"classic":     "  - {name: a, layout: native, retry: {delays: [1s]}}\n",
		"no retries":  "  - {name: a, type: quorum, layout: native}\n",
		"limit":       "  - {name: a, type: quorum, layout: native, delivery_limit: 5, retry: {delays: [1s]}}\n",
		"return":      "  - {name: a, type: quorum, layout: native, return_queue: true, retry: {delays: [1s]}}\n",
		"jitter":      "  - {name: a, type: quorum, layout: shared, retry: {exponential: {initial: 1s, factor: 2, attempts: 2, jitter: full}}}\n",
		"bad layout":  "  - {name: a, type: quorum, layout: natve, retry: {delays: [1s]}}\n",
		"with preset": "  - {name: a, type: quorum, preset: outbox, layout: native, retry: {delays: [1s]}}\n",
	}
	for name, q := range cases {
		_, err := Parse("r.yaml", []byte("version: 1\nvhost: v\nqueues:\n"+q))
		if err == nil || !strings.Contains(err.Error(), "r.yaml:4:") {
			t.Errorf("%s: %v; want an error at r.yaml:4", name, err)
		}
	}
}

const autoSpec = `version: 1
vhost: v
queues:
  - {name: new, type: quorum, retry: {delays: [1s, 2s]}}
  - {name: old, type: quorum, retry: {delays: [1s, 2s]}}
  - {name: classic, retry: {delays: [1s]}}
  - {name: pinned, type: quorum, layout: shared, retry: {delays: [1s]}}
  - {name: off, type: quorum, return_queue: false, retry: {delays: [1s]}}
`

// TestResolveAuto: auto gives a queue that is not live native from 4.3.1
// on; below, a quorum queue a return queue only where it has no message
// priorities (before 4.0, or with the version unknown), a classic queue
// always; a live queue keeps its shape and is reported once where a new
// one would get another; an explicit layout or return_queue wins;
// unresolved, auto expands as shared without a return queue, as before.
func TestResolveAuto(t *testing.T) {
	live := Expand(mustParse(t, "live.yaml", `version: 1
vhost: v
queues:
  - {name: old, type: quorum, retry: {delays: [1s, 2s]}}
`))
	for _, c := range []struct {
		version string
		native  bool
		back    bool // a new quorum queue gets a return queue
		kept    Layout
	}{{"", false, true, LayoutShared}, {"4.0.5", false, false, ""}, {"4.3.0", false, false, ""}, {"4.3.1", true, false, LayoutNative}, {"4.3.6", true, false, LayoutNative}, {"3.10.8", false, true, LayoutShared}} {
		f := mustParse(t, "a.yaml", autoSpec)
		if got := names(Expand(f)); got["new.return"] || got["old.return"] || !got["new.retry"] {
			t.Fatalf("unresolved: %v; want today's layout, no return queue", got)
		}
		v, _ := topology.ParseVersion(c.version)
		kept := Resolve([]*File{f}, Target{RabbitMQ: v, Live: &live})
		got := Expand(f)
		have := names(got)
		nq, _ := got.Queue("v", "new")
		err := errNotNative(nq.Arguments)
		if (err == nil) != c.native || have["new.retry"] == c.native || have["new.return"] != c.back {
			t.Errorf("%q: new has native %v (%v), retry exchange %v, return queue %v", c.version, err == nil, err, have["new.retry"], have["new.return"])
		}
		if !have["old.retry"] || have["old.return"] || have["off.return"] || !have["pinned.retry"] {
			t.Errorf("%q: %v; old keeps shared without a return queue, off has none, pinned stays shared", c.version, have)
		}
		if !have["classic.retry"] || !have["classic.return"] || have["pinned.return"] != c.back {
			t.Errorf("%q: %v; classic is never native and always gets a return queue, pinned one where a new quorum queue does", c.version, have)
		}
		var want []Kept
		if c.kept != "" {
			want = []Kept{{Vhost: "v", Queue: "old", Live: LayoutShared, Auto: c.kept}}
		}
		if diff := cmp.Diff(want, kept); diff != "" {
			t.Errorf("%q: kept (-want +got):\n%s", c.version, diff)
		}
	}
}

// TestResolveKeepsLiveShapes: a live queue keeps native, per-attempt,
// levels and its return queue under auto, read from the broker's objects.
func TestResolveKeepsLiveShapes(t *testing.T) {
	live := Expand(mustParse(t, "live.yaml", `version: 1
vhost: v
queues:
  - {name: n, type: quorum, layout: native, retry: {delays: [1s]}}
  - {name: p, type: quorum, layout: per-attempt, return_queue: true, retry: {delays: [1s]}}
  - {name: l, type: quorum, layout: levels, retry: {delays: [1s]}}
  - {name: s, type: quorum, return_queue: true, retry: {delays: [1s]}}
`))
	f := mustParse(t, "a.yaml", `version: 1
vhost: v
queues:
  - {name: n, type: quorum, retry: {delays: [1s]}}
  - {name: p, type: quorum, retry: {delays: [1s]}}
  - {name: l, type: quorum, retry: {delays: [1s]}}
  - {name: s, type: quorum, retry: {delays: [1s]}}
`)
	for _, v := range []string{"3.13.7", "4.3.6"} {
		ver, _ := topology.ParseVersion(v)
		Resolve([]*File{f}, Target{RabbitMQ: ver, Live: &live})
		prio := rabbitmq.ProfileFor(ver).QuorumPriorities()
		want := map[string]resolution{
			"n": {set: true, layout: LayoutNative, priorities: prio}, "p": {set: true, layout: LayoutPerAttempt, returnQueue: true, priorities: prio},
			"l": {set: true, layout: LayoutLevels, priorities: prio}, "s": {set: true, layout: LayoutShared, returnQueue: true, priorities: prio},
		}
		for _, q := range f.Spec.Queues {
			if q.res != want[q.Name] {
				t.Errorf("%s: %s resolved to %+v, want %+v", v, q.Name, q.res, want[q.Name])
			}
		}
		got := Expand(f)
		if diff := cmp.Diff(live.Queues, got.Queues); diff != "" {
			t.Errorf("%s: the live queues change (-live +resolved):\n%s", v, diff)
		}
	}
}

// TestResolveJitter: a jittered schedule under auto is native from 4.3.1
// and levels below, the one wait-queue layout that draws delays.
func TestResolveJitter(t *testing.T) {
	src := `version: 1
vhost: v
queues:
  - {name: j, type: quorum, retry: {exponential: {initial: 1s, factor: 2, attempts: 3, jitter: full}}}
`
	for v, want := range map[string]Layout{"4.3.6": LayoutNative, "4.3.0": LayoutLevels, "": LayoutLevels} {
		f := mustParse(t, "j.yaml", src)
		ver, _ := topology.ParseVersion(v)
		Resolve([]*File{f}, Target{RabbitMQ: ver})
		if got := f.Spec.LayoutOf(f.Spec.Queues[0]); got != want {
			t.Errorf("%q: %s, want %s", v, got, want)
		}
		if _, err := Parse("j.yaml", []byte(src)); err != nil {
			t.Errorf("auto with jitter is valid: %v", err)
		}
	}
}

// TestResolveNativeFits: auto leaves a queue that sets its own delivery
// limit or return queue out of native; a live native queue on an older
// broker is kept and told how to move back.
func TestResolveNativeFits(t *testing.T) {
	f := mustParse(t, "f.yaml", `version: 1
vhost: v
queues:
  - {name: limit, type: quorum, delivery_limit: 5, retry: {delays: [1s]}}
  - {name: back, type: quorum, return_queue: true, retry: {delays: [1s]}}
  - {name: n, type: quorum, retry: {delays: [1s]}}
`)
	v436, _ := topology.ParseVersion("4.3.6")
	Resolve([]*File{f}, Target{RabbitMQ: v436})
	for i, want := range []Layout{LayoutShared, LayoutShared, LayoutNative} {
		if got := f.Spec.LayoutOf(f.Spec.Queues[i]); got != want {
			t.Errorf("%s: %s, want %s", f.Spec.Queues[i].Name, got, want)
		}
	}
	live := Expand(f)
	v3, _ := topology.ParseVersion("3.13.7")
	kept := Resolve([]*File{f}, Target{RabbitMQ: v3, Live: &live})
	// limit is kept too: made on 4.3.6 without a return queue, where a
	// new queue on 3.13 gets one.
	if len(kept) != 2 || kept[0].Queue != "limit" || kept[1].Queue != "n" || kept[1].Live != LayoutNative || !strings.Contains(kept[1].String(), "layout: shared and migrate: true") {
		t.Errorf("kept %+v; want limit, and n, live native, told to move back", kept)
	}
}

// TestResolveKeptNativeConflict is issue 46's plan of a key the broker
// overrides: a live native queue that auto keeps native, whose spec now
// sets delivery_limit or return_queue, is kept with a Conflict (which the
// plan refuses, RT109), as layout: native written out refuses the same at
// validation; following the advice (removing the key) clears it.
func TestResolveKeptNativeConflict(t *testing.T) {
	live := Expand(mustParse(t, "live.yaml", `version: 1
vhost: v
queues:
  - {name: a, type: quorum, layout: native, retry: {delays: [1s, 2s]}}
  - {name: b, type: quorum, layout: native, retry: {delays: [1s]}}
`))
	v436, _ := topology.ParseVersion("4.3.6")
	for _, tc := range []struct{ body, want string }{
		{"  - {name: a, type: quorum, delivery_limit: 50, retry: {delays: [1s, 2s]}}\n", "delivery_limit does not apply"},
		{"  - {name: b, type: quorum, return_queue: true, retry: {delays: [1s]}}\n", "return_queue does not apply"},
		{"  - {name: a, type: quorum, retry: {delays: [1s, 2s]}}\n", ""},
	} {
		f := mustParse(t, "f.yaml", "version: 1\nvhost: v\nqueues:\n"+tc.body)
		var conflicts []string
		for _, k := range Resolve([]*File{f}, Target{RabbitMQ: v436, Live: &live}) {
			if k.Conflict != "" {
				conflicts = append(conflicts, k.Conflict)
			}
		}
		switch {
		case tc.want == "" && len(conflicts) > 0:
			t.Errorf("%s: conflicts %q, want none", tc.body, conflicts)
		case tc.want != "" && (len(conflicts) != 1 || !strings.Contains(conflicts[0], tc.want)):
			t.Errorf("%s: conflicts %q, want one saying %q", tc.body, conflicts, tc.want)
		}
	}
	if _, err := Parse("n.yaml", []byte("version: 1\nvhost: v\nqueues:\n  - {name: a, type: quorum, layout: native, delivery_limit: 50, retry: {delays: [1s]}}\n")); err == nil || !strings.Contains(err.Error(), "delivery_limit does not apply to layout native") {
		t.Errorf("layout native written out with delivery_limit: %v, want the validation error", err)
	}
}

// scheduleOf reads queue q's schedule from its binding from the schedule
// exchange, as the helper does.
func scheduleOf(t topology.Topology, vhost, q string) (contract.Native, error) {
	for _, bd := range t.Bindings {
		if bd.Vhost == vhost && bd.Source == contract.ScheduleExchange && bd.Destination == q && bd.RoutingKey == q {
			return contract.ParseSchedule(bd.Arguments)
		}
	}
	return contract.Native{}, errors.New("no schedule binding")
}

// errNotNative is nil for the arguments of a native queue.
func errNotNative(args topology.Args) error {
	if contract.IsNative(args) {
		return nil
	}
	return contract.ErrNotNative
}

// policyOf finds a policy of t.
func policyOf(t topology.Topology, vhost, name string) (topology.Policy, bool) {
	for _, p := range t.Policies {
		if p.Vhost == vhost && p.Name == name {
			return p, true
		}
	}
	return topology.Policy{}, false
}

// TestResolveKeepsLiveReturnQueue: on 4.0+, where a new quorum queue gets
// no return queue, a live one keeps its own (removing it would strand the
// retries on their way to it) and the plan's RT107 line says what another
// consumer sees and how to move.
func TestResolveKeepsLiveReturnQueue(t *testing.T) {
	const src = `version: 1
vhost: v
queues:
  - {name: s, type: quorum, retry: {delays: [1s]}}
`
	old := mustParse(t, "live.yaml", src)
	v3, _ := topology.ParseVersion("3.13.7")
	Resolve([]*File{old}, Target{RabbitMQ: v3})
	live := Expand(old)
	f := mustParse(t, "a.yaml", src)
	v4, _ := topology.ParseVersion("4.0.5")
	kept := Resolve([]*File{f}, Target{RabbitMQ: v4, Live: &live})
	if ReturnTo(f.Spec.Queues[0]) != "s.return" {
		t.Errorf("the live return queue is not kept")
	}
	if len(kept) != 1 || !kept[0].ReturnQueue || !strings.Contains(kept[0].String(), "keeps its live return queue s.return") ||
		!strings.Contains(kept[0].String(), "return_queue: false brings them ahead of the backlog") {
		t.Errorf("kept %+v; want s, told what it keeps and how to move", kept)
	}
	if got := names(Expand(f)); !got["s.return"] {
		t.Errorf("expanded %v; want s.return kept", got)
	}
}

// TestNativeBindingShape (issue 46, point 2): a native queue on the
// modified route whose spec sets no attribute needs no policy: its
// arguments carry the marker and its number of retries, its delays are
// in its schedule binding. Live, it keeps that shape: a schedule change
// that keeps the number of retries changes only the binding (even to a
// linear schedule, which stays on the modified route, and with an
// attribute added, whose policy then carries no schedule key); one that
// changes the number changes the arguments (a replace).
func TestNativeBindingShape(t *testing.T) {
	const live = `version: 1
vhost: v
layout: native
queues:
  - {name: a, type: quorum, retry: {exponential: {initial: 1s, factor: 2, attempts: 3}}}
`
	got := Expand(mustParse(t, "live.yaml", live))
	a, _ := got.Queue("v", "a")
	want := merge(atLeastOnce, topology.Args{"x-queue-type": "quorum", "x-delayed-retry-type": "failed", "x-delivery-limit": int64(3), "x-dead-letter-exchange": "a.dlx"})
	if diff := cmp.Diff(want, a.Arguments); diff != "" {
		t.Errorf("a's arguments (-want +got):\n%s", diff)
	}
	if p, ok := policyOf(got, "v", contract.QueuePolicy("a")); ok {
		t.Errorf("a has a policy %v; want none", p.Definition)
	}
	n, err := contract.NativeOf(a.Arguments, scheduleArgs(got, "a"))
	wantN := contract.Native{Route: contract.RouteModified, Delays: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, DeliveryLimit: 3}
	if err != nil || !cmp.Equal(wantN, n) {
		t.Errorf("a's schedule: %+v, %v; want %+v", n, err, wantN)
	}

	ver, _ := topology.ParseVersion("4.3.6")
	for _, c := range []struct {
		name, retry, extra string
		wantArgs           topology.Args
		wantPolicy         topology.Args // nil: none
		wantDelays         []time.Duration
	}{
		{"linear, same count", "{linear: {step: 2s, attempts: 3}}", "", want, nil, []time.Duration{2 * time.Second, 4 * time.Second, 6 * time.Second}},
		{"with an attribute", "{delays: [1s, 1s, 1s]}", ", max_length: 10", want, topology.Args{"max-length": int64(10)}, []time.Duration{time.Second, time.Second, time.Second}},
		{"one more retry", "{delays: [1s, 2s, 4s, 8s]}", "", merge(want, topology.Args{"x-delivery-limit": int64(4)}), nil, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}},
	} {
		f := mustParse(t, "a.yaml", "version: 1\nvhost: v\nlayout: native\nqueues:\n  - {name: a, type: quorum, retry: "+c.retry+c.extra+"}\n")
		Resolve([]*File{f}, Target{RabbitMQ: ver, Live: &got})
		next := Expand(f)
		a, _ := next.Queue("v", "a")
		if diff := cmp.Diff(c.wantArgs, a.Arguments); diff != "" {
			t.Errorf("%s: a's arguments (-want +got):\n%s", c.name, diff)
		}
		p, ok := policyOf(next, "v", contract.QueuePolicy("a"))
		if (c.wantPolicy == nil) == ok || ok && !cmp.Equal(c.wantPolicy, p.Definition) {
			t.Errorf("%s: a's policy %v (%v); want %v", c.name, p.Definition, ok, c.wantPolicy)
		}
		n, err := contract.NativeOf(a.Arguments, scheduleArgs(next, "a"))
		wantN := contract.Native{Route: contract.RouteModified, Delays: c.wantDelays, DeliveryLimit: len(c.wantDelays)}
		if err != nil || !cmp.Equal(wantN, n) {
			t.Errorf("%s: a's schedule %+v, %v; want %+v", c.name, n, err, wantN)
		}
		if r := NativeRoute(f.Spec.Queues[0]); r != contract.RouteModified {
			t.Errorf("%s: NativeRoute %s; want %s", c.name, r, contract.RouteModified)
		}
	}
}

// scheduleArgs returns the arguments of queue q's schedule binding in t,
// nil where it has none.
func scheduleArgs(t topology.Topology, q string) map[string]any {
	for _, bd := range t.Bindings {
		if bd.Source == contract.ScheduleExchange && bd.Destination == q && bd.RoutingKey == q {
			return bd.Arguments
		}
	}
	return nil
}
