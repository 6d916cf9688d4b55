package importer

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

// model is the spec being written: which live objects it declares, and
// how. It is rebuilt from the live topology after every fix, so a demoted
// queue's generated objects come back as raw ones.
type model struct {
	l *live
	// forbid holds work queues not to recognise, with the validator's
	// message: their retry topology did not survive validation, so they
	// are written raw.
	forbid map[string]string
	// why says, for each queue of the vhost written raw, why no retry
	// topology was recognised for it.
	why map[string]string
	// rawLadder says why the vhost's ladder is written raw, "" when it is not.
	rawLadder string
	// drop holds the objects left out, with the reason.
	drop map[topology.Address]string
	// skipped is what the caller found plus, after build, drop.
	given, skipped []Skipped

	exchanges []*exchangeObj
	queues    []*queueObj
	policies  []topology.Policy
	// shared is what the vhost's ladder generates (see ladderShared).
	shared map[topology.Address]bool
	// retired holds the objects of other ladders, left out (in drop).
	retired []topology.Address
	// specs are the specs the vhost's ownership records name, sorted.
	specs []string
}

type exchangeObj struct {
	e        topology.Exchange
	bindings []topology.Binding // exchange-to-exchange bindings into e
}

type queueObj struct {
	q        topology.Queue
	cand     *candidate // nil for a raw queue
	bindings []topology.Binding
}

func newModel(l *live, given []Skipped) *model {
	m := &model{l: l, forbid: map[string]string{}, drop: map[topology.Address]string{}, given: given}
	if l.ladder != nil {
		m.retireOtherLadders()
	}
	m.build()
	return m
}

// build lays the live topology out as a spec: recognised work queues with
// their bindings; every object no recognised queue generates, raw.
func (m *model) build() {
	l := m.l
	cands := m.candidates()
	m.shared = m.ladderShared()
	gen := m.resolve(cands, m.shared)
	if l.ladder != nil {
		m.rawLadder = m.ladderFits(gen, cands)
	}
	if m.rawLadder != "" && l.ladder != nil {
		// A spec with the ladder would not expand to the vhost: write
		// the ladder and its queues raw.
		l.ladder = nil
		m.unretire()
		m.build()
		return
	}
	m.exchanges, m.queues, m.policies = nil, nil, nil
	ex, qs := m.collectObjects(gen, cands)
	m.skipped = append([]Skipped(nil), m.given...)
	m.attachBindings(gen, ex, qs)
	m.collectPolicies(gen)
	for a, why := range m.drop {
		m.skipped = append(m.skipped, Skipped{Object: a.String(), Reason: why})
	}
	sort.SliceStable(m.exchanges, func(i, j int) bool { return naturalLess(m.exchanges[i].e.Name, m.exchanges[j].e.Name) })
	sort.SliceStable(m.queues, func(i, j int) bool { return naturalLess(m.queues[i].q.Name, m.queues[j].q.Name) })
	sort.SliceStable(m.policies, func(i, j int) bool { return naturalLess(m.policies[i].Name, m.policies[j].Name) })
}

// collectObjects puts in m the exchanges and queues neither generated
// (gen) nor dropped, in the topology's order, and returns them by name.
func (m *model) collectObjects(gen map[topology.Address]bool, cands map[string]*candidate) (map[string]*exchangeObj, map[string]*queueObj) {
	l := m.l
	ex := map[string]*exchangeObj{}
	for _, e := range l.t.Exchanges {
		if !gen[e.Addr()] && !m.dropped(e.Addr()) {
			o := &exchangeObj{e: e}
			ex[e.Name] = o
			m.exchanges = append(m.exchanges, o)
		}
	}
	qs := map[string]*queueObj{}
	for _, q := range l.t.Queues {
		if !gen[q.Addr()] && !m.dropped(q.Addr()) {
			o := &queueObj{q: q, cand: cands[q.Name]}
			qs[q.Name] = o
			m.queues = append(m.queues, o)
		}
	}
	return ex, qs
}

// attachBindings gives each binding neither generated nor dropped to its
// destination in ex or qs, and skips one whose destination is in neither.
func (m *model) attachBindings(gen map[topology.Address]bool, ex map[string]*exchangeObj, qs map[string]*queueObj) {
	for _, b := range m.l.t.Bindings {
		a := b.Addr()
		switch {
		case gen[a] || m.dropped(a):
		case b.DestinationType == topology.DestQueue && qs[b.Destination] != nil:
			qs[b.Destination].bindings = append(qs[b.Destination].bindings, b)
		case b.DestinationType == topology.DestExchange && ex[b.Destination] != nil:
			ex[b.Destination].bindings = append(ex[b.Destination].bindings, b)
		default:
			m.skipped = append(m.skipped, Skipped{Object: a.String(), Reason: "its destination is not in the vhost"})
		}
	}
}

// collectPolicies puts in m the policies neither generated nor dropped,
// and skips the managed ones no recognised queue claimed.
func (m *model) collectPolicies(gen map[topology.Address]bool) {
	for _, p := range m.l.t.Policies {
		a := p.Addr()
		switch {
		case gen[a] || m.dropped(a):
		case strings.HasPrefix(p.Name, contract.ManagedPolicyPrefix):
			m.skipped = append(m.skipped, Skipped{Object: a.String(), Reason: m.unclaimedPolicyReason(p)})
		default:
			m.policies = append(m.policies, p)
		}
	}
}

// candidates recognises the retry topology of every queue not left out
// or forbidden, and notes in m.why why a queue has none.
func (m *model) candidates() map[string]*candidate {
	cands := map[string]*candidate{}
	m.why = map[string]string{}
	for _, q := range m.l.t.Queues {
		if m.dropped(q.Addr()) {
			continue
		}
		if why, ok := m.forbid[q.Name]; ok {
			m.why[q.Name] = "its retry block does not validate: " + why
			continue
		}
		if c, why := m.l.recognise(q); c != nil {
			cands[q.Name] = c
		} else {
			m.why[q.Name] = why
		}
	}
	return cands
}

// unclaimedPolicyReason says which of rmqtopo's own policies is left out
// and why: no recognised queue generates it, and a spec's own policies may
// not take names rmqtopo keeps for itself. It names the queue or exchange
// the policy is for, why that is written raw, and the settings the spec
// therefore does not carry.
func (m *model) unclaimedPolicyReason(p topology.Policy) string {
	const prefix = "rmqtopo's own policy (a spec's policies may not be named \"" + contract.ManagedPolicyPrefix + "*\"), left out"
	settings := "its settings (" + policySettings(p.Definition) + ") are not in the spec"
	kind, name, ok := contract.ManagedPolicyTarget(p.Name)
	switch {
	case !ok:
		return prefix + ": no object rmqtopo generates has this name; " + settings
	case kind == "exchange":
		if _, ok := m.l.exchanges[name]; !ok {
			return prefix + fmt.Sprintf(": it is for exchange %q, which the vhost does not have", name)
		}
		return prefix + fmt.Sprintf(": it is for exchange %q, written raw; ", name) + settings
	}
	if _, ok := m.l.queues[name]; !ok {
		return prefix + fmt.Sprintf(": it is for queue %q, which the vhost does not have (a queue since removed)", name)
	}
	why, ok := m.why[name]
	if !ok {
		return prefix + fmt.Sprintf(": it is for queue %q, which no recognised retry topology generates; ", name) + settings
	}
	if m.rawLadder != "" {
		why += "; the vhost's delay ladder is written raw: " + m.rawLadder
	}
	return prefix + fmt.Sprintf(": queue %q is written raw (%s), so ", name, why) + settings
}

// policySettings lists a policy's definition as key=value, sorted.
func policySettings(def topology.Args) string {
	keys := make([]string, 0, len(def))
	for k := range def {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = fmt.Sprintf("%s=%v", k, def[k])
	}
	return strings.Join(keys, ", ")
}

// naturalLess orders names as a person would: digit runs by their value,
// so "q2" comes before "q10"; equal-valued runs fall back to the text.
func naturalLess(a, b string) bool {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if isDigit(a[i]) && isDigit(b[j]) {
			si, sj := i, j
			for i < len(a) && isDigit(a[i]) {
				i++
			}
			for j < len(b) && isDigit(b[j]) {
				j++
			}
			na, nb := strings.TrimLeft(a[si:i], "0"), strings.TrimLeft(b[sj:j], "0")
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			continue
		}
		if a[i] != b[j] {
			return a[i] < b[j]
		}
		i, j = i+1, j+1
	}
	if len(a)-i != len(b)-j {
		return len(a)-i < len(b)-j
	}
	return a < b
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (m *model) dropped(a topology.Address) bool { _, ok := m.drop[a]; return ok }

// resolve demotes the candidates whose generated objects something else
// needs to name (a binding into or out of them, or another candidate's
// work queue), since a spec can only bind declared objects, and returns
// the objects the remaining candidates generate, and shared, which the
// spec generates whatever the candidates.
func (m *model) resolve(cands map[string]*candidate, shared map[topology.Address]bool) map[topology.Address]bool {
	for {
		by := map[topology.Address][]string{}
		for name, c := range cands {
			for a := range c.generated {
				by[a] = append(by[a], name)
			}
		}
		demote := map[string]string{}
		for _, b := range m.l.t.Bindings {
			if len(by[b.Addr()]) > 0 || shared[b.Addr()] || m.dropped(b.Addr()) {
				continue
			}
			for _, a := range []topology.Address{exchangeAddr(b.Vhost, b.Source), destAddr(b)} {
				for _, n := range by[a] {
					demote[n] = fmt.Sprintf("%s refers to %s, which its retry topology generates, and a spec binds only objects it declares", b.Addr(), a)
				}
			}
		}
		for name := range cands {
			a := topology.Address{Kind: topology.KindQueue, Vhost: m.l.vhost, Name: name}
			if others := by[a]; len(others) > 0 {
				demote[name] = fmt.Sprintf("the retry topology of queue %q generates it too", others[0])
			}
		}
		if len(demote) == 0 {
			gen := map[topology.Address]bool{}
			for a := range by {
				gen[a] = true
			}
			for a := range shared {
				gen[a] = true
			}
			return gen
		}
		for n, why := range demote {
			delete(cands, n)
			m.why[n] = why
		}
	}
}

var errPath = regexp.MustCompile(`^(exchanges|queues|policies)\[(\d+)\](?:\.bindings\[(\d+)\])?`)

// fix leaves out, or writes raw, the objects that the errors of the
// written spec point at, and rebuilds. It reports whether it changed
// anything.
func (m *model) fix(es spec.Errors) bool {
	changed := false
	for _, e := range es {
		g := errPath.FindStringSubmatch(e.Path)
		if g == nil {
			continue
		}
		i, _ := strconv.Atoi(g[2])
		if g[3] != "" {
			j, _ := strconv.Atoi(g[3])
			changed = m.dropBinding(g[1], i, j, e.Message) || changed
			continue
		}
		switch g[1] {
		case "exchanges":
			changed = m.set(m.exchanges[i].e.Addr(), e.Message) || changed
		case "policies":
			changed = m.set(m.policies[i].Addr(), e.Message) || changed
		case "queues":
			o := m.queues[i]
			if o.cand != nil {
				// Its retry topology does not validate: write it raw.
				_, forbidden := m.forbid[o.q.Name]
				changed = changed || !forbidden
				m.forbid[o.q.Name] = e.Message
				continue
			}
			changed = m.set(o.q.Addr(), e.Message) || changed
		}
	}
	if changed {
		m.build()
	}
	return changed
}

func (m *model) set(a topology.Address, why string) bool {
	if m.dropped(a) {
		return false
	}
	m.drop[a] = why
	return true
}

func (m *model) dropBinding(kind string, i, j int, why string) bool {
	if kind == "exchanges" {
		return m.set(m.exchanges[i].bindings[j].Addr(), why)
	}
	if kind == "queues" {
		return m.set(m.queues[i].bindings[j].Addr(), why)
	}
	return false
}

// expected is the live topology less what was left out: what the spec
// must expand to.
func (m *model) expected() topology.Topology {
	t := topology.Topology{Vhosts: []string{m.l.vhost}}
	for _, o := range m.exchanges {
		t.Exchanges = append(t.Exchanges, o.e)
		t.Bindings = append(t.Bindings, o.bindings...)
	}
	gen := map[topology.Address]bool{}
	for a := range m.shared {
		gen[a] = true
	}
	for _, o := range m.queues {
		t.Queues = append(t.Queues, o.q)
		t.Bindings = append(t.Bindings, o.bindings...)
		if o.cand != nil {
			for a := range o.cand.generated {
				gen[a] = true
			}
		}
	}
	for _, e := range m.l.t.Exchanges {
		if gen[e.Addr()] {
			t.Exchanges = append(t.Exchanges, e)
		}
	}
	for _, q := range m.l.t.Queues {
		if gen[q.Addr()] {
			t.Queues = append(t.Queues, q)
		}
	}
	for _, b := range m.l.t.Bindings {
		if gen[b.Addr()] {
			t.Bindings = append(t.Bindings, b)
		}
	}
	for _, p := range m.l.t.Policies {
		if gen[p.Addr()] {
			t.Policies = append(t.Policies, p)
		}
	}
	t.Policies = append(t.Policies, m.policies...)
	return t
}
