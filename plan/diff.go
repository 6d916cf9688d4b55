package plan

import (
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"

	"github.com/rmqtopo/rmqtopo/topology"
)

// Options tells Diff what it may delete. Diff never deletes on its own
// judgement: only objects the broker records as rmqtopo's own are candidates.
type Options struct {
	// Prune deletes owned objects that left the spec.
	Prune bool
	// Migrate chooses the queue replaces that become migrations.
	Migrate Migration
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
// elements, their arguments): a plan of a million objects would otherwise
// copy them all. Neither is changed afterwards.
func DiffTopology(live, desired topology.Topology, opts Options) Plan {
	live, inflight := splitMigrations(live, desired)
	desired, legacy := foldLegacy(live, desired, opts.Migrate.Queues, opts.Release)
	d := &differ{
		opts:     opts,
		legacy:   legacy,
		replaced: map[topology.Address]bool{},
		vhosts:   map[string]bool{},
		policies: newPolicyView(live, desired, opts.OperatorPolicies),
	}
	// Most plans hold about one change per object; growing the slice by
	// doubling copies a large plan's changes several times over.
	d.changes = make([]Change, 0, max(objectCount(live), objectCount(desired)))
	d.scope(desired)
	d.diffVhosts(live, desired)
	d.diffExchanges(live, desired)
	d.diffQueues(live, desired)
	d.migrate(inflight)
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
// place, the object would be copied to the heap on every iteration, a
// million times for a plan against nothing.
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
	legacy  map[topology.Address][]string
	changes []Change
	// objects holds the plan's Objects in chunks: one allocation each
	// would be a million small ones for a large plan.
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
		c.Detail().Owner = d.opts.Owner[c.Address]
		if d.opts.Maybe[c.Address] {
			c.Detail().Why = WhyMayDelete
			c.Detail().Owner = "unknown: the source shows no ownership record; deleted only if this spec's record owns it"
		}
	}
	if c.After != nil && len(d.opts.OthersWant[c.Address]) > 0 {
		c.Detail().Conflict = d.conflict(c.Address, c.After.digest())
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
	return Plan{FormatVersion: FormatVersion, Changes: changes}
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
	// an empty broker it would be a million entries for nothing.
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
	// an empty broker it would be a million entries for nothing.
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
		after := d.object()
		after.Queue = q
		was, ok := liveBy[a]
		if len(liveBy) > 0 { // only deletes look it up
			wanted[a] = true
		}
		switch {
		case !ok:
			d.add(Change{Action: Create, Address: a, After: after})
		case reflect.DeepEqual(was, *q) && d.legacy[a] != nil:
			d.add(Change{Action: NoOp, Address: a, Before: &Object{Queue: ptr(was)}, After: after, Details: &Details{Reasons: []Reason{{Kind: ReasonLegacy}}, InPolicy: d.legacy[a]}})
		case reflect.DeepEqual(was, *q):
			d.add(Change{Action: NoOp, Address: a, Before: &Object{Queue: ptr(was)}, After: after})
		default:
			if pinned, ok := d.policies.keepsQueue(was, *q); ok {
				d.add(Change{Action: NoOp, Address: a, Before: &Object{Queue: ptr(was)}, After: after, Details: &Details{Reasons: []Reason{adoptReason(was, pinned)}, Pinned: pinned}})
				continue
			}
			d.replaced[a] = true
			d.add(Change{Action: Replace, Address: a, Before: &Object{Queue: ptr(was)}, After: after, Details: &Details{Reasons: d.policies.replaceReasons(was, *q), Messages: d.messages(a), Consumers: d.consumers(a)}})
		}
	}
	for _, a := range sortedKeysExcept(liveBy, func(a topology.Address) bool { return wanted[a] }) {
		if !d.deletable(a) {
			continue
		}
		was := liveBy[a]
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
}

func (d *differ) diffBindings(live, desired topology.Topology) {
	liveBy := make(map[topology.Address]topology.Binding, len(live.Bindings))
	for _, b := range live.Bindings {
		b := canonicalBinding(b)
		liveBy[b.Addr()] = b
	}
	wanted := d.wantedBindings(desired.Bindings)
	for _, w := range wanted {
		a, b := w.a, w.b
		after := d.object()
		after.Binding = b
		was, ok := liveBy[a]
		switch gone := d.replacedEndpoint(*b); {
		case gone != "":
			d.add(Change{Action: Create, Address: a, After: after, Details: &Details{Reasons: []Reason{{Kind: ReasonRecreated, Subject: gone}}}})
		case ok:
			d.add(Change{Action: NoOp, Address: a, Before: &Object{Binding: ptr(was)}, After: after})
		default:
			d.add(Change{Action: Create, Address: a, After: after})
		}
	}
	if len(liveBy) == 0 {
		return
	}
	desiredExchanges := make(map[topology.Address]bool, len(desired.Exchanges))
	for _, e := range desired.Exchanges {
		desiredExchanges[e.Addr()] = true
	}
	isWanted := func(a topology.Address) bool {
		_, ok := slices.BinarySearchFunc(wanted, a, func(w addressed, a topology.Address) int { return w.a.Compare(a) })
		return ok
	}
	routes := d.wantedRoutes(wanted)
	for _, a := range sortedKeysExcept(liveBy, isWanted) {
		b := liveBy[a]
		if d.replacedEndpoint(b) != "" || !d.vhosts[a.Vhost] || d.keepsRoute(a, b, routes) {
			continue
		}
		source := sourceAddr(b)
		// rmqtopo reconciles every binding of the exchanges it manages, so
		// that a schedule change moves the retry exchange's bindings from the
		// old wait queues to the new ones in one apply. A built-in amq.*
		// source is never in a Topology, so there only rmqtopo's own bindings
		// are removed.
		var remove bool
		switch {
		case topology.Reserved(b.Source):
			remove = b.Source != "" && d.opts.Owned[a]
		default:
			remove = desiredExchanges[source] && (d.opts.Owned[a] || d.opts.Owned[source]) && len(d.opts.Others[a]) == 0
		}
		if remove {
			d.add(Change{Action: Delete, Address: a, Before: &Object{Binding: &b}, Details: &Details{Reasons: notInSpec()}})
		}
	}
}

// route is what a binding routes, without where to: its vhost, source
// and key (destination type, routing key, arguments).
type route struct{ vhost, source, key string }

// wantedRoutes are the routes of the wanted bindings, only when some
// queue is left behind (keepsRoute reads them).
func (d *differ) wantedRoutes(wanted []addressed) map[route]bool {
	if len(d.leftBehind) == 0 {
		return nil
	}
	out := map[route]bool{}
	for _, w := range wanted {
		out[route{w.a.Vhost, w.b.Source, w.a.Key}] = true
	}
	return out
}

// keepsRoute reports whether binding b, at a, stays because its queue is
// left behind: a queue kept without prune keeps what routes to it, so that
// no publish becomes unroutable because a queue left the spec. A route
// the spec now gives to another destination (a renamed queue) moves
// there instead, and b goes.
func (d *differ) keepsRoute(a topology.Address, b topology.Binding, routes map[route]bool) bool {
	return b.DestinationType == topology.DestQueue && d.leftBehind[destinationAddr(b)] && !routes[route{a.Vhost, b.Source, a.Key}]
}

// addressed is a binding with its address, which is all of it in another
// form: computed once, because it renders the binding's arguments.
type addressed struct {
	a topology.Address
	b *topology.Binding
}

// wantedBindings returns the desired bindings in canonical form, sorted by
// address, without duplicates. An expanded spec's bindings are sorted and
// canonical already, and are used as they are; anything else is copied.
func (d *differ) wantedBindings(desired []topology.Binding) []addressed {
	out := make([]addressed, 0, len(desired))
	// Keys with arguments repeat across queues (every retry binding of
	// attempt 2 has the same): the plan keeps one copy of each.
	keys := map[string]string{}
	for i := range desired {
		b := &desired[i]
		if !topology.IsNormal(b.Arguments) {
			c := canonicalBinding(*b)
			b = &c
		}
		a := b.Addr()
		if len(b.Arguments) > 0 {
			if k, ok := keys[a.Key]; ok {
				a.Key = k
			} else {
				keys[a.Key] = a.Key
			}
		}
		out = append(out, addressed{a, b})
	}
	cmp := func(x, y addressed) int { return x.a.Compare(y.a) }
	if !slices.IsSortedFunc(out, cmp) {
		slices.SortStableFunc(out, cmp)
	}
	// Of equal addresses the last wins, as it would in a map.
	n := 0
	for _, w := range out {
		if n > 0 && out[n-1].a == w.a {
			out[n-1] = w
			continue
		}
		out[n] = w
		n++
	}
	return out[:n]
}

// replacedEndpoint names the endpoint of b that the plan replaces, or ""
// when neither is replaced.
func (d *differ) replacedEndpoint(b topology.Binding) string {
	if s := sourceAddr(b); d.replaced[s] {
		return fmt.Sprintf("exchange %q", s.Name)
	}
	if t := destinationAddr(b); d.replaced[t] {
		return fmt.Sprintf("%s %q", t.Kind, t.Name)
	}
	return ""
}

func sourceAddr(b topology.Binding) topology.Address {
	return topology.Address{Kind: topology.KindExchange, Vhost: b.Vhost, Name: b.Source}
}

func destinationAddr(b topology.Binding) topology.Address {
	kind := topology.KindQueue
	if b.DestinationType == topology.DestExchange {
		kind = topology.KindExchange
	}
	return topology.Address{Kind: kind, Vhost: b.Vhost, Name: b.Destination}
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

// The canonical forms make reflect.DeepEqual mean "the broker would see the
// same object": arguments normalised, an empty table the same as none.

// Arguments already canonical, as those of an expanded spec or a read
// broker are, are shared rather than copied: nothing in a plan changes
// them, and a plan of a million objects would otherwise copy them all.

func canonical(a topology.Args) topology.Args {
	if topology.IsNormal(a) {
		return a
	}
	return topology.NormalizeArgs(a)
}

func canonicalExchange(e topology.Exchange) topology.Exchange {
	e.Arguments = canonical(e.Arguments)
	return e
}

func canonicalQueue(q topology.Queue) topology.Queue {
	q.Arguments = canonical(q.Arguments)
	return q
}

func canonicalBinding(b topology.Binding) topology.Binding {
	b.Arguments = canonical(b.Arguments)
	return b
}

func canonicalPolicy(p topology.Policy) topology.Policy {
	p.Definition = canonical(p.Definition)
	return p
}

func exchangeDifferences(was, want topology.Exchange) []Reason {
	var out []Reason
	if was.Type != want.Type {
		out = append(out, Reason{Kind: ReasonImmutable, Subject: "exchange type", Was: was.Type, Want: want.Type})
	}
	out = append(out, flagDifferences("exchange", []flag{
		{"durable", was.Durable, want.Durable},
		{"auto_delete", was.AutoDelete, want.AutoDelete},
		{"internal", was.Internal, want.Internal},
	})...)
	return append(out, argDifferences(ReasonImmutable, "exchange argument ", was.Arguments, want.Arguments)...)
}

func queueDifferences(was, want topology.Queue) []Reason {
	var out []Reason
	// The type lives in an argument, but "classic" is its absence, so name
	// it the way a reader thinks of it.
	if was.QueueType() != want.QueueType() {
		out = append(out, Reason{Kind: ReasonImmutable, Subject: "queue type", Was: was.QueueType(), Want: want.QueueType()})
	}
	out = append(out, flagDifferences("queue", []flag{
		{"durable", was.Durable, want.Durable},
		{"auto_delete", was.AutoDelete, want.AutoDelete},
	})...)
	wasArgs, wantArgs := withoutQueueType(was.Arguments), withoutQueueType(want.Arguments)
	return append(out, argDifferences(ReasonImmutable, "queue argument ", wasArgs, wantArgs)...)
}

func withoutQueueType(a topology.Args) topology.Args {
	out := topology.Args{}
	for k, v := range a {
		if k != "x-queue-type" {
			out[k] = v
		}
	}
	return out
}

func policyDifferences(was, want topology.Policy) []Reason {
	var out []Reason
	if was.Pattern != want.Pattern {
		out = append(out, Reason{Kind: ReasonChanged, Subject: "policy pattern", Was: strconv.Quote(was.Pattern), Want: strconv.Quote(want.Pattern)})
	}
	if was.ApplyTo != want.ApplyTo {
		out = append(out, Reason{Kind: ReasonChanged, Subject: "policy apply_to", Was: was.ApplyTo, Want: want.ApplyTo})
	}
	if was.Priority != want.Priority {
		out = append(out, Reason{Kind: ReasonChanged, Subject: "policy priority", Was: strconv.FormatInt(was.Priority, 10), Want: strconv.FormatInt(want.Priority, 10)})
	}
	return append(out, argDifferences(ReasonChanged, "policy definition ", was.Definition, want.Definition)...)
}

type flag struct {
	name      string
	was, want bool
}

func flagDifferences(kind string, flags []flag) []Reason {
	var out []Reason
	for _, f := range flags {
		if f.was != f.want {
			out = append(out, Reason{Kind: ReasonImmutable, Subject: kind + " " + f.name, Was: strconv.FormatBool(f.was), Want: strconv.FormatBool(f.want)})
		}
	}
	return out
}

// argDifferences gives a reason of kind for each differing key, in key
// order, its subject the key after subject.
func argDifferences(kind ReasonKind, subject string, was, want topology.Args) []Reason {
	keys := map[string]bool{}
	for k := range was {
		keys[k] = true
	}
	for k := range want {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var out []Reason
	for _, k := range sorted {
		a, inWas := was[k]
		b, inWant := want[k]
		if inWas == inWant && reflect.DeepEqual(a, b) {
			continue
		}
		out = append(out, Reason{Kind: kind, Subject: subject + k, Was: FormatValue(a, inWas), Want: FormatValue(b, inWant)})
	}
	return out
}

// FormatValue renders an argument value the way plans show it: as JSON, or
// "unset" when the argument is absent.
func FormatValue(v any, set bool) string {
	if !set {
		return "unset"
	}
	// What json.Marshal writes for the common scalars, without its cost:
	// a large plan shows millions of values.
	switch x := v.(type) {
	case string:
		if topology.JSONPlain(x) {
			return `"` + x + `"`
		}
	case int64:
		return strconv.FormatInt(x, 10)
	case bool:
		return strconv.FormatBool(x)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// sortedKeysExcept returns m's keys in order, without the addresses that
// skip says to leave out, which are never sorted: in a plan with few changes almost
// every live object is wanted, and sorting 16,000 addresses only to skip
// them was a good part of the plan's cost.
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
