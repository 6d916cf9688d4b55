// Package importer writes a spec for what already exists in one vhost, so
// that a team can adopt rmqtopo for a broker it already runs.
//
// Import takes the vhost's current topology (read from a live broker or a
// definitions export) and writes a spec that expands back to exactly that
// topology: planning the spec against the same source shows no changes.
// Retry topologies it recognises (rmqtopo's own layouts and the presets)
// become retry blocks and presets; everything else is written as raw
// exchanges, queues, bindings and policies. Recognition is by trial: a
// guessed queue is expanded with package spec and kept only when the live
// topology holds every object of the expansion, so it stays right when
// what a layout or preset generates changes.
//
// What the spec cannot express is never dropped silently: it is returned
// in Result.Skipped, with the reason, and written as comments in the spec.
// Users and permissions are not topology and are ignored, so no password
// (hash) ever reaches a spec.
package importer

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Input is what to import.
type Input struct {
	// Vhost is the one vhost to import; objects of others are ignored.
	Vhost string
	// Topology is the current topology, as a plan.Source reads it.
	Topology topology.Topology
	// Source says where the topology came from, for the header comment,
	// e.g. "definitions file defs.json". It must not hold credentials.
	Source string
	// Skipped are objects the source holds that Topology cannot carry,
	// found by the caller (see Extras).
	Skipped []Skipped
	// Release is the source's RabbitMQ version; unknown when it does not
	// say. Its default arguments (a quorum queue's delivery limit from 4.0
	// on) are the same queue declared or not.
	Release topology.Version
	// Records are the ownership records of the vhost: the specs rmqtopo
	// applied there. One record names the imported spec.
	Records []topology.Record
}

// Skipped is one object that the spec does not represent, and why.
type Skipped struct {
	Object string `json:"object"`
	Reason string `json:"reason"`
}

func (s Skipped) String() string { return s.Object + ": " + s.Reason }

// Result is an import's outcome.
type Result struct {
	// YAML is the spec.
	YAML []byte
	// File is YAML parsed, ready to expand.
	File *spec.File
	// Skipped lists what the spec leaves out, sorted.
	Skipped []Skipped
	// Recognised counts the queues written with retry topology that
	// reproduces theirs.
	Recognised int
	// Adopted counts the queues whose hand-made retry scheme the spec
	// adopts (handmade.go): planned, it changes the vhost.
	Adopted int
	// Name is the spec's name as written: the spec of the vhost's one
	// ownership record, "" when it has none or several.
	Name string
	// Specs are the specs the vhost's ownership records name, sorted.
	Specs []string
	// Unrecorded is set when the source holds no ownership record though
	// the vhost holds what rmqtopo applies (its policies, a recognised
	// retry topology):
	// a definitions export of RabbitMQ 4.3, which leaves the records out
	// with every internal exchange, so the spec's name is unknown.
	Unrecorded bool
}

// maxRounds bounds the validate-and-demote loop; each round removes at
// least one object or demotes one queue, and in practice one round is
// enough.
const maxRounds = 1000

// Import writes the spec of in.Vhost. It fails only on an internal
// inconsistency: a spec it wrote that does not expand back to the
// topology it was written from.
func Import(in Input) (*Result, error) {
	l := index(in.Topology, in.Vhost, in.Release)
	m := newModel(l, in.Skipped)
	m.specs = recordedSpecs(in.Records, in.Vhost)
	for round := 0; ; round++ {
		data := m.yaml(in.Source)
		f, err := spec.Parse("imported.yaml", data)
		if err == nil {
			return m.result(data, f)
		}
		var es spec.Errors
		if !errors.As(err, &es) || round >= maxRounds {
			return nil, fmt.Errorf("the written spec does not load: %w", err)
		}
		if !m.fix(es) {
			return nil, fmt.Errorf("the written spec does not load, and no object can be left out to fix it: %w", err)
		}
	}
}

// result checks that the spec expands back to the live topology less what
// was skipped, and packs the result.
func (m *model) result(data []byte, f *spec.File) (*Result, error) {
	want := m.expected()
	// Planned against the live vhost, queues an earlier rmqtopo made keep
	// their shape, which the comparison must grant too.
	got := plan.KeepLegacy(want, spec.ExpandFor(m.l.release, f), m.l.release)
	// A levels queue applied before it had a marker gets one from its
	// spec, which the next apply adds.
	got.Exchanges = slices.DeleteFunc(got.Exchanges, func(e topology.Exchange) bool {
		_, live := m.l.exchanges[e.Name]
		return !live && contract.IsLevelsMarker(e.Name)
	})
	// An adopted hand-made scheme changes the vhost: its objects and
	// those of its expansion are the plan's to show, not this check's.
	scope := m.adoptedScope()
	want, got = without(want, scope), without(got, scope)
	if !reflect.DeepEqual(normal(want), normal(got)) {
		return nil, fmt.Errorf("the written spec does not reproduce vhost %q: %s", m.l.vhost, firstDifference(want, got))
	}
	sk := m.sortedSkipped()
	adopted := m.adoptedCount()
	n := -adopted
	for _, q := range m.queues {
		if q.cand != nil {
			n++
		}
	}
	return &Result{YAML: data, File: f, Skipped: sk, Recognised: n, Adopted: adopted, Name: m.name(), Specs: m.specs, Unrecorded: m.unrecorded()}, nil
}

// recordedSpecs are the distinct specs that records name in vhost, sorted.
func recordedSpecs(records []topology.Record, vhost string) []string {
	var out []string
	for _, r := range records {
		if r.Vhost == vhost && !slices.Contains(out, r.Spec) {
			out = append(out, r.Spec)
		}
	}
	slices.Sort(out)
	return out
}

// unrecorded reports a vhost without an ownership record that holds
// what rmqtopo applies: its policies, or a retry topology it recognised.
func (m *model) unrecorded() bool {
	if len(m.specs) > 0 {
		return false
	}
	for _, o := range m.queues {
		if o.cand != nil && !o.cand.adopt {
			return true
		}
	}
	for name := range m.l.policies {
		if strings.HasPrefix(name, contract.ManagedPolicyPrefix) {
			return true
		}
	}
	return false
}

// name is the spec's name: the one spec the vhost's ownership records
// name, so that plan and apply of the imported spec act for the spec that
// owns the vhost's objects, not for a new one named after the file. With
// several, the imported spec describes them all and takes none's name.
func (m *model) name() string {
	if len(m.specs) == 1 {
		return m.specs[0]
	}
	return ""
}

// normal makes empty and nil slices compare equal.
func normal(t topology.Topology) topology.Topology {
	t.Sort()
	fix := func(n int) bool { return n == 0 }
	if fix(len(t.Exchanges)) {
		t.Exchanges = nil
	}
	if fix(len(t.Queues)) {
		t.Queues = nil
	}
	if fix(len(t.Bindings)) {
		t.Bindings = nil
	}
	if fix(len(t.Policies)) {
		t.Policies = nil
	}
	return t
}

func firstDifference(want, got topology.Topology) string {
	w, g := addrs(want), addrs(got)
	for a, v := range w {
		if gv, ok := g[a]; !ok {
			return fmt.Sprintf("%s is missing", a)
		} else if !reflect.DeepEqual(v, gv) {
			return fmt.Sprintf("%s differs", a)
		}
	}
	for a := range g {
		if _, ok := w[a]; !ok {
			return fmt.Sprintf("%s is extra", a)
		}
	}
	return "the vhosts differ"
}

func addrs(t topology.Topology) map[topology.Address]any {
	out := map[topology.Address]any{}
	for _, e := range t.Exchanges {
		out[e.Addr()] = e
	}
	for _, q := range t.Queues {
		out[q.Addr()] = q
	}
	for _, b := range t.Bindings {
		out[b.Addr()] = b
	}
	for _, p := range t.Policies {
		out[p.Addr()] = p
	}
	return out
}

// adoptedCount counts the queues whose hand-made scheme the spec adopts.
func (m *model) adoptedCount() int {
	n := 0
	for _, o := range m.queues {
		if o.cand != nil && o.cand.adopt {
			n++
		}
	}
	return n
}

// adoptedScope is every object an adopted hand-made scheme concerns: its
// work queue, what it takes over, and what its expansion declares.
func (m *model) adoptedScope() map[topology.Address]bool {
	out := map[topology.Address]bool{}
	for _, o := range m.queues {
		if o.cand == nil || !o.cand.adopt {
			continue
		}
		out[o.q.Addr()] = true
		for a := range o.cand.generated {
			out[a] = true
		}
		for a := range addrs(m.l.expand(o.cand.q)) {
			out[a] = true
		}
	}
	for a := range out {
		if a.Kind == topology.KindQueue { // the policy a kept shape gives it (plan.KeepLegacy)
			out[topology.Address{Kind: topology.KindPolicy, Vhost: a.Vhost, Name: contract.QueuePolicy(a.Name)}] = true
		}
	}
	return out
}

// without is t less the objects at the addresses of skip.
func without(t topology.Topology, skip map[topology.Address]bool) topology.Topology {
	if len(skip) == 0 {
		return t
	}
	return topology.Topology{Vhosts: t.Vhosts, Exchanges: keep(t.Exchanges, skip), Queues: keep(t.Queues, skip),
		Bindings: keep(t.Bindings, skip), Policies: keep(t.Policies, skip)}
}

// keep is xs less the objects at the addresses of skip.
func keep[T interface{ Addr() topology.Address }](xs []T, skip map[topology.Address]bool) []T {
	var out []T
	for _, x := range xs {
		if !skip[x.Addr()] {
			out = append(out, x)
		}
	}
	return out
}
