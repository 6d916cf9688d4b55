package apply_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/apply"
	"github.com/rmqtopo/rmqtopo/apply/target"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

// fake records the calls apply makes, in order, as "op name" strings.
type fake struct {
	mu       sync.Mutex
	calls    []string
	owned    map[string][]topology.Address // last record per vhost
	fail     map[string]error              // by call string
	inFlight atomic.Int64
	maxSeen  atomic.Int64
	delay    time.Duration
}

var errNotEmpty = fmt.Errorf("fake: not empty: %w", target.ErrNotEmpty)

func (f *fake) call(ctx context.Context, s string) error {
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for {
		m := f.maxSeen.Load()
		if n <= m || f.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	if f.delay > 0 {
		time.Sleep(f.delay)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
	return f.fail[s]
}

func (f *fake) PutVhost(ctx context.Context, v string) error { return f.call(ctx, "put-vhost "+v) }
func (f *fake) DeclareExchange(ctx context.Context, e topology.Exchange) error {
	return f.call(ctx, "declare-exchange "+e.Name)
}
func (f *fake) DeclareQueue(ctx context.Context, q topology.Queue) error {
	return f.call(ctx, "declare-queue "+q.Name)
}
func (f *fake) Bind(ctx context.Context, b topology.Binding) error {
	return f.call(ctx, "bind "+b.Source+"->"+b.Destination)
}
func (f *fake) Unbind(ctx context.Context, b topology.Binding) error {
	return f.call(ctx, "unbind "+b.Source+"->"+b.Destination)
}
func (f *fake) PutPolicy(ctx context.Context, p topology.Policy) error {
	return f.call(ctx, "put-policy "+p.Name)
}
func (f *fake) DeletePolicy(ctx context.Context, v, n string) error {
	return f.call(ctx, "delete-policy "+n)
}
func (f *fake) DeleteExchange(ctx context.Context, v, n string) error {
	return f.call(ctx, "delete-exchange "+n)
}
func (f *fake) DeleteQueue(ctx context.Context, q topology.Queue, ifEmpty bool) error {
	return f.call(ctx, fmt.Sprintf("delete-queue %s if-empty=%t", q.Name, ifEmpty))
}
func (f *fake) PutRecord(ctx context.Context, r topology.Record) error {
	var owned []topology.Address
	for a := range r.Owned {
		owned = append(owned, a)
	}
	sort.Slice(owned, func(i, j int) bool { return owned[i].Less(owned[j]) })
	f.mu.Lock()
	if f.owned == nil {
		f.owned = map[string][]topology.Address{}
	}
	f.owned[r.Vhost] = owned
	f.mu.Unlock()
	var names []string
	for _, a := range owned {
		names = append(names, a.Kind.String()+":"+a.Name)
	}
	return f.call(ctx, "put-owned "+r.Vhost+" ["+strings.Join(names, " ")+"]")
}

// records is the spec "s"'s record in vh owning owned.
func records(owned ...topology.Address) map[string]topology.Record {
	r := topology.NewRecord("s", vh)
	r.Generation = 1
	for _, a := range owned {
		r.Owned[a] = true
	}
	return map[string]topology.Record{vh: r}
}

const vh = "v"

func ex(name string) topology.Exchange {
	return topology.Exchange{Vhost: vh, Name: name, Type: "fanout", Durable: true}
}
func qu(name string) topology.Queue { return topology.Queue{Vhost: vh, Name: name, Durable: true} }
func bi(src, dst string) topology.Binding {
	return topology.Binding{Vhost: vh, Source: src, Destination: dst, DestinationType: topology.DestQueue}
}
func po(name string) topology.Policy {
	return topology.Policy{Vhost: vh, Name: name, Pattern: ".*", ApplyTo: "queues", Definition: topology.Args{"max-length": int64(1)}}
}

func create(o any) plan.Change                     { return change(plan.Create, nil, o) }
func del(o any) plan.Change                        { return change(plan.Delete, o, nil) }
func replace(o any) plan.Change                    { return change(plan.Replace, o, o) }
func noop(o any) plan.Change                       { return change(plan.NoOp, o, o) }
func zero() *int64                                 { n := int64(0); return &n }
func msgs(n int64) *int64                          { return &n }
func withMsgs(c plan.Change, n *int64) plan.Change { c.EditDetails().Messages = n; return c }

func change(a plan.Action, before, after any) plan.Change {
	obj := func(o any) (*plan.Object, topology.Address) {
		switch x := o.(type) {
		case topology.Exchange:
			return &plan.Object{Exchange: &x}, x.Addr()
		case topology.Queue:
			return &plan.Object{Queue: &x}, x.Addr()
		case topology.Binding:
			return &plan.Object{Binding: &x}, x.Addr()
		case topology.Policy:
			return &plan.Object{Policy: &x}, x.Addr()
		case string:
			return &plan.Object{}, topology.Address{Kind: topology.KindVhost, Name: x}
		}
		return nil, topology.Address{}
	}
	c := plan.Change{Action: a}
	if before != nil {
		c.Before, c.Address = obj(before)
	}
	if after != nil {
		c.After, c.Address = obj(after)
	}
	return c
}

func TestApplyOrderAndOwnership(t *testing.T) {
	// Deliberately out of order: Apply must order by phase itself.
	p := plan.Plan{Changes: []plan.Change{
		withMsgs(del(qu("old.wait")), zero()),
		del(bi("retry", "old.wait")),
		create(bi("retry", "new.wait")),
		create(po("limits")),
		create(qu("new.wait")),
		noop(qu("work")),
		create(ex("retry")),
		create("v"),
		del(po("gone")),
		del(ex("old.x")),
	}}
	owned := records(qu("old.wait").Addr(), bi("retry", "old.wait").Addr(), ex("old.x").Addr(),
		po("gone").Addr(), qu("work").Addr())
	f := &fake{}
	res, err := apply.Apply(context.Background(), f, p, apply.Options{Concurrency: 1, Records: owned})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		// The vhost first, since the record lives in it; then the intent:
		// everything owned plus everything about to be created.
		"put-vhost v",
		"put-owned v [exchange:old.x exchange:retry policy:gone policy:limits queue:new.wait queue:old.wait queue:work binding:retry -> new.wait binding:retry -> old.wait]",
		"put-policy limits",
		"declare-exchange retry",
		"declare-queue new.wait",
		"bind retry->new.wait",
		"unbind retry->old.wait",
		"delete-queue old.wait if-empty=true",
		"delete-exchange old.x",
		"delete-policy gone",
		// Final record: the deleted objects are gone from it.
		"put-owned v [exchange:retry policy:limits queue:new.wait queue:work binding:retry -> new.wait]",
	}
	if diff := cmp.Diff(want, sortOwned(f.calls)); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if res.Created != 5 || res.Deleted != 4 || res.Changes() != 9 {
		t.Errorf("result %+v, want 5 created and 4 deleted", res)
	}
}

// sortOwned makes put-owned lines deterministic: kinds in a fixed order.
func sortOwned(calls []string) []string {
	order := map[string]int{"vhost": 0, "exchange": 1, "policy": 2, "queue": 3, "binding": 4}
	out := make([]string, len(calls))
	for i, c := range calls {
		rest, ok := strings.CutPrefix(c, "put-owned ")
		if !ok {
			out[i] = c
			continue
		}
		v, list, _ := strings.Cut(rest, " ")
		items := splitOwned(strings.Trim(list, "[]"))
		sortSlice(items, func(a, b string) bool {
			ka, _, _ := strings.Cut(a, ":")
			kb, _, _ := strings.Cut(b, ":")
			if order[ka] != order[kb] {
				return order[ka] < order[kb]
			}
			return a < b
		})
		out[i] = "put-owned " + v + " [" + strings.Join(items, " ") + "]"
	}
	return out
}

// splitOwned splits "kind:name kind:a -> b" at the kind prefixes.
func splitOwned(s string) []string {
	var out []string
	for _, f := range strings.Fields(s) {
		if strings.Contains(f, ":") || len(out) == 0 {
			out = append(out, f)
		} else {
			out[len(out)-1] += " " + f
		}
	}
	return out
}

func sortSlice(s []string, less func(a, b string) bool) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && less(s[j], s[j-1]); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func TestApplyReplaceQueueIsGuarded(t *testing.T) {
	p := plan.Plan{Changes: []plan.Change{withMsgs(replace(qu("work")), zero())}}
	for _, allow := range []bool{false, true} {
		f := &fake{}
		if _, err := apply.Apply(context.Background(), f, p, apply.Options{AllowDestroy: allow, Records: records()}); err != nil {
			t.Fatal(err)
		}
		want := []string{
			"put-owned v [queue:work]",
			fmt.Sprintf("delete-queue work if-empty=%t", !allow),
			"declare-queue work",
		}
		if diff := cmp.Diff(want, f.calls); diff != "" {
			t.Errorf("AllowDestroy=%t: calls (-want +got):\n%s", allow, diff)
		}
	}
}

func TestApplyRefusesBlockingPlan(t *testing.T) {
	p := plan.Plan{Changes: []plan.Change{withMsgs(replace(qu("work")), msgs(3))}}
	checked := func(allow bool) apply.Options {
		return apply.Options{AllowDestroy: allow, Records: records(), Diagnostics: plan.Check(p, plan.CheckOptions{AllowDestroy: allow})}
	}
	f := &fake{}
	_, err := apply.Apply(context.Background(), f, p, checked(false))
	if err == nil || !strings.Contains(err.Error(), "refusing") || !strings.Contains(err.Error(), "3 messages") {
		t.Fatalf("err = %v, want a refusal naming 3 messages", err)
	}
	if len(f.calls) != 0 {
		t.Errorf("calls = %q, want none", f.calls)
	}
	// Unknown counts are refused too.
	p.Changes[0].EditDetails().Messages = nil
	if _, err := apply.Apply(context.Background(), f, p, checked(false)); err == nil {
		t.Fatal("a replace with an unknown count was applied")
	}
	// Accepted with AllowDestroy.
	if _, err := apply.Apply(context.Background(), f, p, checked(true)); err != nil {
		t.Fatal(err)
	}
}

// TestApplyRefusesWhatThePlanShowed: apply refuses by the diagnostics it
// is given, those the plan showed, including the version's (RT103 on a
// plan judged for 4.3), which a check of its own without the version
// missed.
func TestApplyRefusesWhatThePlanShowed(t *testing.T) {
	q := topology.Queue{Vhost: "v", Name: "scratch", Durable: true, Arguments: topology.Args{"x-queue-version": int64(1)}}
	p := plan.Plan{Changes: []plan.Change{create(qu("scratch"))}, RabbitMQ: &plan.Judged{Version: "4.3.0", From: "flag"}}
	p.Changes[0].After = &plan.Object{Queue: &q}
	f := &fake{}
	_, err := apply.Apply(context.Background(), f, p, apply.Options{Records: records(), Diagnostics: plan.Check(p, plan.CheckOptions{})})
	if err == nil || !strings.Contains(err.Error(), "refusing") || !strings.Contains(err.Error(), "x-queue-version 1") {
		t.Fatalf("err = %v, want the RT103 refusal", err)
	}
	if len(f.calls) != 0 {
		t.Errorf("calls = %q, want none", f.calls)
	}
}

func TestApplyStopsAtFirstFailedPhase(t *testing.T) {
	p := plan.Plan{Changes: []plan.Change{
		create(qu("a")), create(qu("b")), create(bi("x", "a")), withMsgs(del(qu("old")), zero()),
	}}
	f := &fake{fail: map[string]error{"declare-queue b": errors.New("the broker refused: inequivalent arg")}}
	res, err := apply.Apply(context.Background(), f, p, apply.Options{Concurrency: 1,
		Records: records(qu("old").Addr())})
	if err == nil || err.Error() != `create queue "b" in vhost "v": the broker refused: inequivalent arg` {
		t.Fatalf("err = %v", err)
	}
	for _, c := range f.calls {
		if strings.HasPrefix(c, "bind") || strings.HasPrefix(c, "delete") {
			t.Errorf("%q ran after a failed phase", c)
		}
	}
	// The final record keeps what was created and drops the failed intent.
	last := f.owned[vh]
	var names []string
	for _, a := range last {
		names = append(names, a.Name)
	}
	if diff := cmp.Diff([]string{"a", "old"}, names); diff != "" {
		t.Errorf("final ownership (-want +got):\n%s", diff)
	}
	if res.Created != 1 {
		t.Errorf("Created = %d, want 1", res.Created)
	}
	// What was not done is listed, for the message.
	var notDone []string
	for _, c := range res.NotDone {
		notDone = append(notDone, c.Action.String()+" "+c.Address.Name)
	}
	if diff := cmp.Diff([]string{"create b", "create x -> a", "delete old"}, notDone); diff != "" {
		t.Errorf("NotDone (-want +got):\n%s", diff)
	}
}

func TestApplyNotEmptyIsExplained(t *testing.T) {
	p := plan.Plan{Changes: []plan.Change{withMsgs(del(qu("old")), zero())}}
	f := &fake{fail: map[string]error{"delete-queue old if-empty=true": errNotEmpty}}
	_, err := apply.Apply(context.Background(), f, p, apply.Options{
		Records: records(qu("old").Addr()),
	})
	if err == nil || !strings.Contains(err.Error(), "arrived after the plan was made") || !errors.Is(err, errNotEmpty) {
		t.Fatalf("err = %v", err)
	}
}

func TestApplyBoundsConcurrency(t *testing.T) {
	var changes []plan.Change
	for i := 0; i < 50; i++ {
		changes = append(changes, create(qu(fmt.Sprintf("q%02d", i))))
	}
	f := &fake{delay: 5 * time.Millisecond}
	var progress, recording atomic.Int64
	res, err := apply.Apply(context.Background(), f, plan.Plan{Changes: changes},
		apply.Options{Concurrency: 4, Records: records(), Progress: func(p apply.Progress) {
			if p.Total != 50 {
				t.Errorf("total = %d", p.Total)
			}
			switch p.Step {
			case apply.StepRecords:
				recording.Add(1)
			case plan.PhaseQueue.String():
				progress.Add(1)
			default:
				t.Errorf("step %q, want the queue phase or recording", p.Step)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if m := f.maxSeen.Load(); m != 4 {
		t.Errorf("max in flight = %d, want 4", m)
	}
	// One report as the queue phase starts, then one per change.
	if res.Created != 50 || progress.Load() != 51 || recording.Load() != 1 {
		t.Errorf("Created = %d, progress calls = %d and %d recording, want 50, 51 and 1", res.Created, progress.Load(), recording.Load())
	}
}

func TestApplyVhostCreatedHook(t *testing.T) {
	p := plan.Plan{Changes: []plan.Change{create("v"), create(qu("a"))}}
	f := &fake{}
	_, err := apply.Apply(context.Background(), f, p, apply.Options{Records: records(), VhostCreated: func(ctx context.Context, v string) error {
		return errors.New("lock held elsewhere")
	}})
	if err == nil || !strings.Contains(err.Error(), "lock held elsewhere") {
		t.Fatalf("err = %v", err)
	}
	for _, c := range f.calls {
		if c == "declare-queue a" {
			t.Error("created a queue in a vhost whose hook failed")
		}
	}
}

func TestApplyNothingToDo(t *testing.T) {
	f := &fake{}
	res, err := apply.Apply(context.Background(), f, plan.Plan{Changes: []plan.Change{noop(qu("a"))}}, apply.Options{})
	if err != nil || len(f.calls) != 0 || res.Changes() != 0 {
		t.Fatalf("err = %v, calls = %q, changes = %d", err, f.calls, res.Changes())
	}
}

// TestApplyRetiredQueue (issue 43 point 1): a queue the spec retires is
// recorded as the spec's own, kept or not, and its delete is guarded by
// if-empty even when destruction is allowed; once deleted it leaves the
// record.
func TestApplyRetiredQueue(t *testing.T) {
	retired := func(c plan.Change) plan.Change { c.EditDetails().Why = plan.WhyRetired; return c }
	kept := plan.Plan{Changes: []plan.Change{retired(change(plan.NoOp, qu("old.retry"), nil))}}
	f := &fake{}
	if _, err := apply.Apply(context.Background(), f, kept, apply.Options{Records: records()}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"put-owned v [queue:old.retry]"}, f.calls); diff != "" {
		t.Errorf("a kept retired queue: calls (-want +got):\n%s", diff)
	}
	gone := plan.Plan{Changes: []plan.Change{retired(withMsgs(del(qu("old.retry")), zero()))}}
	for _, allow := range []bool{false, true} {
		f := &fake{}
		if _, err := apply.Apply(context.Background(), f, gone, apply.Options{AllowDestroy: allow, Records: records(qu("old.retry").Addr())}); err != nil {
			t.Fatal(err)
		}
		want := []string{"delete-queue old.retry if-empty=true", "put-owned v []"}
		if diff := cmp.Diff(want, f.calls); diff != "" {
			t.Errorf("AllowDestroy=%t: calls (-want +got):\n%s", allow, diff)
		}
	}
}
