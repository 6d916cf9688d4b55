package plan_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/apply"
	"github.com/rmqtopo/rmqtopo/cmd/rmqtopo/flagwords"
	"github.com/rmqtopo/rmqtopo/internal/converge"
	"github.com/rmqtopo/rmqtopo/internal/definitions"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/render"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

var update = flag.Bool("update", false, "rewrite the plans of testdata/converge/*.txtar (review the diff!)")

// TestConverge runs the convergence corpus (internal/converge) offline:
// the case's current spec is planned and applied to an empty in-memory
// broker, its desired spec planned against that (the plan must be the
// case's) and applied, and a last plan must find nothing to do.
// cmd/rmqtopo's TestOnlineConverge runs the same cases on a real node.
func TestConverge(t *testing.T) {
	cases, err := converge.Load("testdata/converge")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			b := newMemBroker()
			planApply(t, b, c.Current, converge.Flags{})
			got, p := planApply(t, b, c.Desired, c.Flags)
			if *update {
				if err := c.WritePlan(got); err != nil {
					t.Fatal(err)
				}
			} else if diff := cmp.Diff(c.Plan, got); diff != "" {
				t.Errorf("plan (-%s +got):\n%s", c.Path, diff)
			}
			if !p.HasChanges() {
				t.Errorf("the case changes nothing: it tests no convergence")
			}
			if again, p := planApply(t, b, c.Desired, c.Flags); p.HasChanges() {
				t.Errorf("after the apply, planning again still has changes:\n%s", again)
			}
		})
	}
}

// planApply plans a spec against b as the CLI's plan does, applies the
// plan to b as its apply does, and returns the plan and its text.
func planApply(t *testing.T, b *memBroker, data []byte, f converge.Flags) (string, plan.Plan) {
	t.Helper()
	file, err := spec.Parse(converge.FileDesired, data)
	if err != nil {
		t.Fatalf("spec: %v", err)
	}
	files := []*spec.File{file}
	specs := spec.Names(files)
	ch := plan.Choices{Specs: specs, Prune: f.Prune, Migrate: plan.Migration{All: f.Migrate, Queues: spec.Migrations(files...)}}
	// As the CLI does: the judged version and what is live choose the
	// layout auto gives each queue.
	var kept []plan.LayoutKept
	ch.Expand = func(st *topology.State) topology.Topology {
		v, _ := topology.ParseVersion(converge.RabbitMQ)
		kept = kept[:0]
		for _, k := range spec.Resolve(files, spec.Target{RabbitMQ: v, Live: &st.Topology}) {
			kept = append(kept, plan.LayoutKept{Address: topology.Address{Kind: topology.KindQueue, Vhost: k.Vhost, Name: k.Queue}, Move: k.String()})
		}
		return spec.Expand(files...)
	}
	ctx := context.Background()
	p, st, err := plan.Make(ctx, b, spec.Expand(files...), ch)
	if err != nil {
		t.Fatal(err)
	}
	j, err := plan.JudgeVersion(converge.RabbitMQ, st, "broker")
	if err != nil {
		t.Fatal(err)
	}
	p.RabbitMQ = &j
	diags := flagwords.Diagnostics(plan.Check(p, plan.CheckOptions{AllowDestroy: f.AllowDestroy, Specs: specs, State: st, Kept: kept}))
	var out bytes.Buffer
	if err := render.PlanText(&out, p, diags, render.TextOptions{VersionFlag: flagwords.RabbitMQVersion}); err != nil {
		t.Fatal(err)
	}
	_, err = apply.Apply(ctx, b, p, apply.Options{AllowDestroy: f.AllowDestroy, Diagnostics: diags, Records: plan.OwnRecords(st, specs)})
	if err != nil {
		t.Fatalf("apply: %v\n%s", err, out.String())
	}
	return out.String(), p
}

// memBroker is a broker in memory, both the plan.Source and the
// apply.Target of TestConverge. Its queues are empty and have no
// consumers, like those of the online test's fresh vhost. Read passes the
// topology through a definitions document, as the live reader does.
type memBroker struct {
	mu      sync.Mutex // apply runs a phase's changes concurrently
	t       topology.Topology
	records map[[2]string]topology.Record // by vhost and spec
}

func newMemBroker() *memBroker { return &memBroker{records: map[[2]string]topology.Record{}} }

func (m *memBroker) Read(_ context.Context, vhosts []string) (*topology.State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := topology.NewState(vhosts)
	st.Topology = definitions.Clean(definitions.FromTopology(m.t).ToTopology(vhosts...))
	for _, r := range m.records {
		if slices.Contains(vhosts, r.Vhost) {
			st.Records = append(st.Records, r.Clone())
			for a := range r.Owned {
				st.Owned[a] = true
			}
		}
	}
	return st, nil
}

func (m *memBroker) Count(_ context.Context, st *topology.State, queues map[string][]string) error {
	for v, names := range queues {
		for _, n := range names {
			if _, ok := st.Topology.Queue(v, n); ok {
				a := topology.Address{Kind: topology.KindQueue, Vhost: v, Name: n}
				st.Messages[a], st.Consumers[a] = 0, 0
			}
		}
	}
	return nil
}

// put adds or replaces, by address, one object of a list.
func put[T interface{ Addr() topology.Address }](list []T, o T) []T {
	return append(drop(list, func(x T) bool { return x.Addr() == o.Addr() }), o)
}

func drop[T any](list []T, gone func(T) bool) []T {
	return slices.DeleteFunc(slices.Clone(list), gone)
}

// edit changes the topology under the lock and keeps it sorted; f's
// error, a refusal like the broker's, changes nothing.
func (m *memBroker) edit(f func(t *topology.Topology) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.t
	if err := f(&t); err != nil {
		return err
	}
	t.Sort()
	m.t = t
	return nil
}

// declare adds o, or refuses it, as the broker does, when an object of
// its address exists with other attributes (PRECONDITION_FAILED).
func declare[T interface{ Addr() topology.Address }](list []T, o T) ([]T, error) {
	for _, x := range list {
		if x.Addr() == o.Addr() && !reflect.DeepEqual(x, o) {
			return nil, fmt.Errorf("inequivalent %s: have %+v, declared %+v", o.Addr(), x, o)
		}
	}
	return put(list, o), nil
}

func (m *memBroker) PutVhost(_ context.Context, v string) error {
	return m.edit(func(t *topology.Topology) error {
		if !slices.Contains(t.Vhosts, v) {
			t.Vhosts = append(t.Vhosts, v)
		}
		return nil
	})
}

func (m *memBroker) DeclareExchange(_ context.Context, e topology.Exchange) (err error) {
	return m.edit(func(t *topology.Topology) error { t.Exchanges, err = declare(t.Exchanges, e); return err })
}

func (m *memBroker) DeclareQueue(_ context.Context, q topology.Queue) (err error) {
	return m.edit(func(t *topology.Topology) error { t.Queues, err = declare(t.Queues, q); return err })
}

// MigrateQueue re-creates the queue; its bindings stay, as the live
// migration hands them over and back.
func (m *memBroker) MigrateQueue(_ context.Context, q topology.Queue) error {
	return m.edit(func(t *topology.Topology) error { t.Queues = put(t.Queues, q); return nil })
}

// Bind refuses, as the broker does, a binding whose ends do not exist
// (NOT_FOUND): the apply order must create them first.
func (m *memBroker) Bind(_ context.Context, b topology.Binding) error {
	return m.edit(func(t *topology.Topology) error {
		_, src := t.Exchange(b.Vhost, b.Source)
		_, dst := t.Queue(b.Vhost, b.Destination)
		if b.DestinationType == topology.DestExchange {
			_, dst = t.Exchange(b.Vhost, b.Destination)
		}
		if !src || !dst {
			return fmt.Errorf("bind %s: no such source or destination", b.Addr())
		}
		t.Bindings = put(t.Bindings, b)
		return nil
	})
}

func (m *memBroker) Unbind(_ context.Context, b topology.Binding) error {
	return m.edit(func(t *topology.Topology) error {
		t.Bindings = drop(t.Bindings, func(x topology.Binding) bool { return x.Addr() == b.Addr() })
		return nil
	})
}

func (m *memBroker) PutPolicy(_ context.Context, p topology.Policy) error {
	return m.edit(func(t *topology.Topology) error { t.Policies = put(t.Policies, p); return nil })
}

func (m *memBroker) DeletePolicy(_ context.Context, v, name string) error {
	return m.edit(func(t *topology.Topology) error {
		t.Policies = drop(t.Policies, func(p topology.Policy) bool { return p.Vhost == v && p.Name == name })
		return nil
	})
}

// DeleteExchange deletes the exchange and, as the broker does, every
// binding from or to it.
func (m *memBroker) DeleteExchange(_ context.Context, v, name string) error {
	return m.edit(func(t *topology.Topology) error {
		t.Exchanges = drop(t.Exchanges, func(e topology.Exchange) bool { return e.Vhost == v && e.Name == name })
		t.Bindings = drop(t.Bindings, func(b topology.Binding) bool {
			return b.Vhost == v && (b.Source == name || b.DestinationType == topology.DestExchange && b.Destination == name)
		})
		return nil
	})
}

// DeleteQueue deletes the queue and its bindings; every queue is empty,
// so ifEmpty never keeps one.
func (m *memBroker) DeleteQueue(_ context.Context, q topology.Queue, _ bool) error {
	return m.edit(func(t *topology.Topology) error {
		t.Queues = drop(t.Queues, func(x topology.Queue) bool { return x.Addr() == q.Addr() })
		t.Bindings = drop(t.Bindings, func(b topology.Binding) bool {
			return b.Vhost == q.Vhost && b.DestinationType == topology.DestQueue && b.Destination == q.Name
		})
		return nil
	})
}

func (m *memBroker) PutRecord(_ context.Context, r topology.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.records[[2]string{r.Vhost, r.Spec}] = r.Clone()
	return nil
}
