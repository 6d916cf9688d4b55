package plan

import (
	"cmp"
	"reflect"
	"slices"
	"sort"

	"github.com/rmqtopo/rmqtopo/topology"
)

// Options tells Diff what it may delete. Diff never deletes on its own
// judgement: only objects the broker records as rmqtopo's own are candidates.
type Options struct {
	// Prune deletes owned objects that left the spec.
	Prune bool
	// Migrate chooses the queue replaces that become migrations.
	Migrate Migration
	// Retire holds queues the spec retires (adopted to be deleted once
	// empty); see retiredQueue.
	Retire map[topology.Address]bool
	// Owned holds the objects this spec may delete: rmqtopo created them
	// for it, as its ownership record says, and no other spec claims them.
	Owned map[topology.Address]bool
	// Owner says, for display and the JSON plan, why an object of Owned is
	// this spec's (which record owns it); see Change.Owner.
	Owner map[topology.Address]string
	// Others lists the other specs whose records claim an object; such an
	// object is never deleted for this spec.
	Others map[topology.Address][]string
	// OthersWant holds, for an object other specs claim, the digest of the
	// attributes each wants (topology.Digest), by spec.
	OthersWant map[topology.Address]map[string]string
	// Specs names the spec of each vhost, for messages.
	Specs map[string]string
	// Maybe marks the objects of Owned that are only possibly this spec's:
	// the source could not show ownership records (a definitions export
	// without them). Their deletes are marked WhyMayDelete.
	Maybe map[topology.Address]bool
	// Messages is the live message count of each queue, by queue address. A
	// queue missing here has an unknown count, which Check treats as unsafe.
	Messages map[topology.Address]int64
	// Consumers is the live consumer count of each queue, by queue address.
	// A queue missing here has an unknown count.
	Consumers map[topology.Address]int64
	// IsWaitQueue recognises the name of a generated wait queue; nil
	// recognises none.
	IsWaitQueue func(name string) bool
	// OperatorPolicies are the live operator policies, which cap the
	// numeric limits of the queues they match; see PolicyConflict.
	OperatorPolicies []topology.Policy
	// Release is the live broker's RabbitMQ version, whose default
	// arguments (topology.DefaultArguments) a queue need not declare;
	// unknown: none.
	Release topology.Version
}

// notInSpec is the reason of a delete of an object that left the spec.
func notInSpec() []Reason { return []Reason{{Kind: ReasonNotInSpec}} }

// DiffTopology plans the changes that take live to desired, given the
// ownership and counts already worked out in opts (Diff works them out
// from a source's state). It is pure: the same
// inputs always give the same plan, in the same order.
//
// Exchanges and queues are immutable in RabbitMQ, so any difference replaces
// them (delete, then create), which also drops every binding touching them;
// the plan re-creates the desired ones. Policies are updated in place.
// Bindings have no content beyond their identity: they are only created or
// deleted. Vhosts are only ever created. Deletion is limited to owned objects
// in the vhosts that desired describes, and the broker's reserved objects
// ("" and amq.*) are never touched.
//
// The plan's objects may share memory with desired's (its slices'
// elements, their arguments), so that planning copies no object; neither
// is changed afterwards.
func DiffTopology(live, desired topology.Topology, opts Options) Plan {
	live, inflight := splitMigrations(live, desired)
	desired, nativeKept := foldNative(live, desired, opts.Migrate.Queues)
	desired, legacy := foldLegacy(live, desired, opts.Migrate.Queues, opts.Release)
	d := &differ{
		opts:       opts,
		legacy:     legacy,
		nativeKept: nativeKept,
		replaced:   map[topology.Address]bool{},
		vhosts:     map[string]bool{},
		policies:   newPolicyView(live, desired, opts.OperatorPolicies),
	}
	// Most plans hold about one change per object: sized once for that,
	// the slice never grows by copying.
	d.changes = make([]Change, 0, max(objectCount(live), objectCount(desired)))
	d.scope(desired)
	d.diffVhosts(live, desired)
	d.diffExchanges(live, desired)
	d.diffQueues(live, desired)
	d.migrate(inflight)
	d.waitForRetired(live)
	// Bindings come after exchanges and queues because a replace of either
	// decides what happens to the bindings touching it.
	d.diffBindings(live, desired)
	d.diffPolicies(live, desired)
	d.keepDrainingLadders()
	p := d.plan()
	p.PolicyConflicts = d.policies.conflicts(desired)
	return p
}

// ptr returns a pointer to a copy of v. The loops over desired objects
// take a live object's address only for a change that shows it: taken in
// place, the object would escape to the heap on every iteration.
func ptr[T any](v T) *T { return &v }

func objectCount(t topology.Topology) int {
	return len(t.Vhosts) + len(t.Exchanges) + len(t.Queues) + len(t.Bindings) + len(t.Policies)
}

type differ struct {
	opts Options
	// vhosts are the vhosts desired describes; nothing outside them is
	// deleted, so applying one vhost's spec never prunes another vhost.
	vhosts map[string]bool
	// replaced holds the exchanges and queues this plan deletes and
	// re-creates; their bindings vanish with them.
	replaced map[topology.Address]bool
	// leftBehind holds the queues kept although they left the spec (no
	// prune); their bindings are kept with them (keepsRoute).
	leftBehind map[topology.Address]bool
	// policies are the policies in force after the plan (policy.go).
	policies *policyView
	// legacy holds the queues kept in an earlier rmqtopo's shape, with
	// the arguments they lack (legacy.go).
	legacy map[topology.Address][]string
	// nativeKept holds the native queues kept with their schedule in
	// their arguments, as an earlier rmqtopo made them (nativefold.go).
	nativeKept map[topology.Address]bool
	changes    []Change
	// objects holds the plan's Objects in chunks: one allocation per
	// chunk, not per object.
	objects []Object
}

// object returns a new Object of the plan.
func (d *differ) object() *Object {
	if len(d.objects) == cap(d.objects) {
		d.objects = make([]Object, 0, 4096)
	}
	d.objects = d.objects[:len(d.objects)+1]
	return &d.objects[len(d.objects)-1]
}

func (d *differ) scope(desired topology.Topology) {
	for _, v := range desired.VhostNames() {
		d.vhosts[v] = true
	}
}

func (d *differ) add(c Change) {
	if c.Action == Delete {
		c.EditDetails().Owner = d.opts.Owner[c.Address]
		if d.opts.Maybe[c.Address] {
			c.EditDetails().Why = WhyMayDelete
			c.EditDetails().Owner = "unknown: the source shows no ownership record; deleted only if this spec's record owns it"
		}
	}
	if c.After != nil && len(d.opts.OthersWant[c.Address]) > 0 {
		c.EditDetails().Conflict = d.conflict(c.Address, c.After.digest())
	}
	d.changes = append(d.changes, c)
}

// conflict names the other specs whose records want a with attributes
// other than digest.
func (d *differ) conflict(a topology.Address, digest string) []string {
	var out []string
	for spec, want := range d.opts.OthersWant[a] {
		if want != digest && digest != "" {
			out = append(out, spec)
		}
	}
	sort.Strings(out)
	return out
}

func (d *differ) plan() Plan {
	slices.SortStableFunc(d.changes, func(a, b Change) int {
		if pa, pb := a.Phase(), b.Phase(); pa != pb {
			return cmp.Compare(pa, pb)
		}
		return compareAddresses(a.Address, b.Address)
	})
	changes := d.changes
	if changes == nil {
		changes = []Change{}
	}
	return Plan{Changes: changes}
}

// deletable reports whether a live object that left the spec may be
// deleted at all; Prune and the wait-queue rule then decide whether it is.
func (d *differ) deletable(a topology.Address) bool {
	return d.vhosts[a.Vhost] && !topology.Reserved(a.Name) && d.opts.Owned[a]
}

func (d *differ) messages(a topology.Address) *int64 {
	n, ok := d.opts.Messages[a]
	if !ok {
		return nil
	}
	return &n
}

func (d *differ) consumers(a topology.Address) *int64 {
	n, ok := d.opts.Consumers[a]
	if !ok {
		return nil
	}
	return &n
}

func (d *differ) diffVhosts(live, desired topology.Topology) {
	have := map[string]bool{}
	for _, v := range live.Vhosts {
		have[v] = true
	}
	seen := map[string]bool{}
	for _, v := range desired.Vhosts {
		if have[v] || seen[v] {
			continue
		}
		seen[v] = true
		// A vhost has no content beyond its name, which the address holds.
		d.add(Change{Action: Create, Address: topology.Address{Kind: topology.KindVhost, Name: v}, After: &Object{}})
	}
}

func (d *differ) diffExchanges(live, desired topology.Topology) {
	liveBy := make(map[topology.Address]topology.Exchange, len(live.Exchanges))
	for _, e := range live.Exchanges {
		if !topology.Reserved(e.Name) {
			liveBy[e.Addr()] = canonicalExchange(e)
		}
	}
	// Only deletes need the set, and only when something is live: against
	// an empty broker it would hold every desired object for nothing.
	var wanted map[topology.Address]bool
	if len(liveBy) > 0 {
		wanted = make(map[topology.Address]bool, len(desired.Exchanges))
	}
	for i := range desired.Exchanges {
		e := &desired.Exchanges[i]
		if topology.Reserved(e.Name) {
			continue
		}
		if !topology.IsNormal(e.Arguments) {
			c := canonicalExchange(*e)
			e = &c
		}
		a := e.Addr()
		after := d.object()
		after.Exchange = e
		was, ok := liveBy[a]
		if len(liveBy) > 0 { // only deletes look it up
			wanted[a] = true
		}
		switch {
		case !ok:
			d.add(Change{Action: Create, Address: a, After: after})
		case reflect.DeepEqual(was, *e):
			d.add(Change{Action: NoOp, Address: a, Before: &Object{Exchange: ptr(was)}, After: after})
		default:
			d.replaced[a] = true
			d.add(Change{Action: Replace, Address: a, Before: &Object{Exchange: ptr(was)}, After: after, Details: &Details{Reasons: exchangeDifferences(was, *e)}})
		}
	}
	for _, a := range sortedKeysExcept(liveBy, func(a topology.Address) bool { return wanted[a] }) {
		if !d.deletable(a) || !d.opts.Prune {
			continue
		}
		was := liveBy[a]
		d.add(Change{Action: Delete, Address: a, Before: &Object{Exchange: &was}, Details: &Details{Reasons: notInSpec()}})
	}
}

func (d *differ) diffQueues(live, desired topology.Topology) {
	liveBy := make(map[topology.Address]topology.Queue, len(live.Queues))
	for _, q := range live.Queues {
		if !topology.Reserved(q.Name) {
			liveBy[q.Addr()] = canonicalQueue(q)
		}
	}
	// Only deletes need the set, and only when something is live: against
	// an empty broker it would hold every desired queue for nothing.
	var wanted map[topology.Address]bool
	if len(liveBy) > 0 {
		wanted = make(map[topology.Address]bool, len(desired.Queues))
	}
	for i := range desired.Queues {
		q := &desired.Queues[i]
		if topology.Reserved(q.Name) {
			continue
		}
		if !topology.IsNormal(q.Arguments) {
			c := canonicalQueue(*q)
			q = &c
		}
		a := q.Addr()
		if len(liveBy) > 0 { // only deletes look it up
			wanted[a] = true
		}
		was, ok := liveBy[a]
		d.desiredQueue(a, q, was, ok)
	}
	for _, a := range sortedKeysExcept(liveBy, func(a topology.Address) bool { return wanted[a] }) {
		switch {
		case d.retirable(a):
			d.retiredQueue(a, liveBy[a])
		case d.deletable(a):
			d.undesiredQueue(a, liveBy[a])
		}
	}
}

// desiredQueue plans queue q of the spec, at a, live as was if live.
func (d *differ) desiredQueue(a topology.Address, q *topology.Queue, was topology.Queue, live bool) {
	after := d.object()
	after.Queue = q
	switch {
	case !live:
		d.add(Change{Action: Create, Address: a, After: after})
	case reflect.DeepEqual(was, *q) && d.legacy[a] != nil:
		d.add(Change{Action: NoOp, Address: a, Before: &Object{Queue: ptr(was)}, After: after, Details: &Details{Reasons: []Reason{{Kind: ReasonLegacy}}, InPolicy: d.legacy[a]}})
	case reflect.DeepEqual(was, *q) && d.nativeKept[a]:
		d.add(Change{Action: NoOp, Address: a, Before: &Object{Queue: ptr(was)}, After: after, Details: &Details{Reasons: []Reason{{Kind: ReasonNativeInArguments}}}})
	case reflect.DeepEqual(was, *q):
		d.add(Change{Action: NoOp, Address: a, Before: &Object{Queue: ptr(was)}, After: after})
	default:
		if pinned, ok := d.policies.keepsQueue(was, *q); ok {
			d.add(Change{Action: NoOp, Address: a, Before: &Object{Queue: ptr(was)}, After: after, Details: &Details{Reasons: []Reason{adoptReason(was, pinned)}, Pinned: pinned}})
			return
		}
		d.replaced[a] = true
		reasons := d.policies.replaceReasons(was, *q)
		if d.nativeKept[a] {
			reasons = append(reasons, Reason{Kind: ReasonNativeInArguments})
		}
		d.add(Change{Action: Replace, Address: a, Before: &Object{Queue: ptr(was)}, After: after, Details: &Details{Reasons: reasons, Messages: d.messages(a), Consumers: d.consumers(a)}})
	}
}

// undesiredQueue plans live queue was, at a, which rmqtopo may delete and
// the spec no longer declares.
func (d *differ) undesiredQueue(a topology.Address, was topology.Queue) {
	before := &Object{Queue: &was}
	n := d.messages(a)
	switch {
	// A retired wait queue holds retries in flight that expire back into
	// their work queue by themselves, so it is kept until it is empty,
	// with or without Prune: waiting never loses a message, deleting
	// would. Its TTL bounds the wait.
	case d.opts.IsWaitQueue != nil && d.opts.IsWaitQueue(a.Name):
		switch {
		case n != nil && *n == 0:
			d.add(Change{Action: Delete, Address: a, Before: before, Details: &Details{Reasons: []Reason{{Kind: ReasonRetiredEmpty}}, Messages: n, Consumers: d.consumers(a)}})
		case n != nil:
			d.add(Change{Action: NoOp, Address: a, Before: before, Details: &Details{Messages: n, Why: WhyDraining, Reasons: []Reason{{Kind: ReasonRetiredDraining, Count: *n}}}})
		default:
			d.add(Change{Action: NoOp, Address: a, Before: before, Details: &Details{Why: WhyDraining, Reasons: []Reason{{Kind: ReasonRetiredUnknown}}}})
		}
	case d.opts.Prune:
		d.add(Change{Action: Delete, Address: a, Before: before, Details: &Details{Reasons: notInSpec(), Messages: n, Consumers: d.consumers(a)}})
	default:
		// Not pruned, so kept; said, because messages there are
		// stranded: nothing the spec declares reads the queue.
		d.add(Change{Action: NoOp, Address: a, Before: before, Details: &Details{Reasons: []Reason{{Kind: ReasonLeftBehind}}, Messages: n, Why: WhyLeftBehind}})
		if d.leftBehind == nil {
			d.leftBehind = map[topology.Address]bool{}
		}
		d.leftBehind[a] = true
	}
}

func (d *differ) diffPolicies(live, desired topology.Topology) {
	liveBy := map[topology.Address]topology.Policy{}
	for _, p := range live.Policies {
		liveBy[p.Addr()] = canonicalPolicy(p)
	}
	wanted := map[topology.Address]bool{}
	for i := range desired.Policies {
		p := &desired.Policies[i]
		if !topology.IsNormal(p.Definition) {
			c := canonicalPolicy(*p)
			p = &c
		}
		a := p.Addr()
		after := d.object()
		after.Policy = p
		was, ok := liveBy[a]
		if len(liveBy) > 0 { // only deletes look it up
			wanted[a] = true
		}
		switch {
		case !ok:
			d.add(Change{Action: Create, Address: a, After: after})
		case reflect.DeepEqual(was, *p):
			d.add(Change{Action: NoOp, Address: a, Before: &Object{Policy: ptr(was)}, After: after})
		default:
			d.add(Change{Action: Update, Address: a, Before: &Object{Policy: ptr(was)}, After: after, Details: &Details{Reasons: policyDifferences(was, *p)}})
		}
	}
	for _, a := range sortedKeysExcept(liveBy, func(a topology.Address) bool { return wanted[a] }) {
		if !d.deletable(a) || !(d.opts.Prune || governsDesired(a, desired)) {
			continue
		}
		was := liveBy[a]
		d.add(Change{Action: Delete, Address: a, Before: &Object{Policy: &was}, Details: &Details{Reasons: notInSpec()}})
	}
}

// sortedKeysExcept returns m's keys in order, without the addresses that
// skip says to leave out, which are never sorted: in a plan with few
// changes almost every live object is wanted.
func sortedKeysExcept[V any](m map[topology.Address]V, skip func(topology.Address) bool) []topology.Address {
	var out []topology.Address
	for a := range m {
		if !skip(a) {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out
}
