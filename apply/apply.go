// Package apply carries out a plan against a broker.
//
// Apply never re-diffs: it executes the plan's changes, in dependency
// order, with bounded concurrency within each phase, and records what
// rmqtopo owns before it creates anything. Safety lives in two places: the
// plan's diagnostics (plan.Check) must have no blocking error, and every
// queue delete is guarded by the broker (if-empty) unless destruction was
// allowed, so messages that arrived after the plan was made stop the apply
// instead of being destroyed. Apply does not check the plan again: it
// receives Check's diagnostics (Options.Diagnostics), the same ones the
// plan showed, and refuses the plan while any of them blocks.
//
// Every Target operation is idempotent, so an apply killed at any point is
// finished by planning and applying again.
package apply

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Target is the broker as apply sees it.
//
// Every method is idempotent: declaring an object that exists with the same
// properties succeeds and changes nothing; deleting an object that does not
// exist succeeds. Declaring an object that exists with other properties
// fails (RabbitMQ's exchanges and queues are immutable); the plan replaces
// such objects instead. Errors are returned without naming the object:
// Apply adds that. Methods are called concurrently.
type Target interface {
	// PutVhost creates a vhost.
	PutVhost(ctx context.Context, vhost string) error
	// DeclareExchange declares an exchange.
	DeclareExchange(ctx context.Context, e topology.Exchange) error
	// DeclareQueue declares a queue.
	DeclareQueue(ctx context.Context, q topology.Queue) error
	// Bind creates a binding; bindings are a set, so binding twice is one
	// binding.
	Bind(ctx context.Context, b topology.Binding) error
	// Unbind deletes a binding.
	Unbind(ctx context.Context, b topology.Binding) error
	// PutPolicy creates or updates a policy.
	PutPolicy(ctx context.Context, p topology.Policy) error
	// DeletePolicy deletes a policy.
	DeletePolicy(ctx context.Context, vhost, name string) error
	// DeleteExchange deletes an exchange and the bindings touching it.
	DeleteExchange(ctx context.Context, vhost, name string) error
	// DeleteQueue deletes a queue and its bindings. With ifEmpty, a queue
	// that holds messages (or, where the implementation can tell, has
	// consumers that may hold unacknowledged ones) is kept, with its
	// bindings as they were, and the error is one that Options.IsNotEmpty
	// recognises. q is the queue as the plan saw it; its arguments tell
	// the implementation its type.
	DeleteQueue(ctx context.Context, q topology.Queue, ifEmpty bool) error
	// PutRecord writes a spec's ownership record in its vhost, as the
	// next generation: the record is whole, not a change to the last one.
	PutRecord(ctx context.Context, r topology.Record) error
}

// DefaultConcurrency is how many changes of one phase are in flight at
// once; docs/benchmarks.md has the measurements behind it.
const DefaultConcurrency = 32

// Options tune an apply.
type Options struct {
	// Concurrency bounds the changes in flight within a phase; 0 means
	// DefaultConcurrency.
	Concurrency int
	// AllowDestroy accepts changes that destroy messages: queues are
	// deleted without the if-empty guard. (Check, given the same choice,
	// has already made the diagnostics it accepts warnings.)
	AllowDestroy bool
	// Diagnostics are plan.Check's findings for the plan; Apply refuses
	// the plan, before any write, while one of them blocks (see
	// plan.Blocking). Apply does not run the checks itself: one check
	// pipeline, so that apply refuses exactly what the plan showed.
	Diagnostics []plan.Diagnostic
	// Records are the spec's ownership records read with the plan's live
	// state, by vhost (see plan.OwnRecords): what rmqtopo created for the
	// spec that still exists. Apply writes the next generation of each.
	Records map[string]topology.Record
	// Progress, if set, is called after each change with the number done
	// and the total. It is called concurrently.
	Progress func(done, total int)
	// VhostCreated, if set, is called right after a vhost is created and
	// before anything is created in it; the CLI takes the vhost's lock
	// there. An error stops the apply.
	VhostCreated func(ctx context.Context, vhost string) error
	// IsNotEmpty recognises Target's error for a guarded queue delete that
	// found messages or consumers, to explain it; nil recognises none.
	IsNotEmpty func(error) bool
}

// Result says what an apply did.
type Result struct {
	Created, Updated, Replaced, Deleted, Migrated int
	// Records are the ownership records as written at the end, by vhost.
	Records map[string]topology.Record
	// NotDone lists the changes that were not made, in plan order, when
	// the apply stopped early.
	NotDone []plan.Change
	// Elapsed is the wall time of the changes.
	Elapsed time.Duration
}

// Changes counts the changes made.
func (r Result) Changes() int { return r.Created + r.Updated + r.Replaced + r.Deleted + r.Migrated }

// Apply executes p's changes against t. It refuses a plan with blocking
// diagnostics (Options.Diagnostics), creates the plan's vhosts, records
// ownership of everything it is about to create before creating it, runs
// the other phases, and records the final ownership even when a change
// fails. It stops at the end of the first phase with a failure and
// returns the first error, wrapped with the change it belongs to;
// Result.NotDone then lists what was not done.
func Apply(ctx context.Context, t Target, p plan.Plan, opts Options) (Result, error) {
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if err := refuseBlocking(opts.Diagnostics); err != nil {
		return Result{}, err
	}
	steps := ordered(p)
	res := Result{Records: map[string]topology.Record{}}
	for v, r := range opts.Records {
		res.Records[v] = r.Clone()
		forgetFinishedMigrations(p, res.Records[v].Owned)
	}
	if len(steps) == 0 {
		// Nothing to change, but the spec may now declare objects that
		// exist already (adopted or shared): its record must claim them,
		// so that no other spec deletes them.
		next := intentOf(p, nil, res.Records)
		err := writeRecords(ctx, t, next, res.Records)
		res.Records = next
		return res, err
	}
	for _, c := range steps {
		if _, ok := res.Records[c.Address.Vhost]; !ok && c.Address.Kind != topology.KindVhost {
			return res, fmt.Errorf("apply: no ownership record of the spec for vhost %q was given; refusing to change what could not be recorded", c.Address.Vhost)
		}
	}
	r := &runner{t: t, opts: opts, total: len(steps)}
	start := time.Now()
	// Records live in their vhost, so a vhost is created before its
	// record can be written.
	n := 0
	for n < len(steps) && steps[n].Phase() == plan.PhaseVhost {
		n++
	}
	runErr := r.phases(ctx, steps[:n])
	intent := intentOf(p, steps, res.Records)
	if runErr == nil {
		runErr = writeRecords(ctx, t, intent, res.Records)
	}
	if runErr == nil {
		runErr = r.phases(ctx, steps[n:])
	}
	res.Elapsed = time.Since(start)
	final := finalOf(intent, res.Records, r.done)
	keepUnfinishedMigrations(steps, r.done, final)
	if err := writeRecords(ctx, t, final, intent); err != nil && runErr == nil {
		runErr = err
	}
	res.count(r.done)
	res.Records = final
	if runErr != nil {
		res.NotDone = notDone(steps, r.done)
	}
	return res, runErr
}

// refuseBlocking refuses a plan whose diagnostics block it.
func refuseBlocking(ds []plan.Diagnostic) error {
	blocking := plan.Blocking(ds)
	if len(blocking) == 0 {
		return nil
	}
	msg := blocking[0].Message
	if len(blocking) > 1 {
		msg += fmt.Sprintf(" (and %d more)", len(blocking)-1)
	}
	return fmt.Errorf("apply: refusing: %s", msg)
}

// ordered returns p's changes that do something, in apply order.
func ordered(p plan.Plan) []plan.Change {
	var steps []plan.Change
	for _, c := range p.Changes {
		if c.Action != plan.NoOp {
			steps = append(steps, c)
		}
	}
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].Phase() < steps[j].Phase() })
	return steps
}

// intentOf returns, for each vhost the plan touches, the spec's record as
// it will be once everything the plan creates exists: the plan's desired
// objects as claims, and as owned what was owned plus what it creates.
// The spec of a vhost is that of its record in have.
func intentOf(p plan.Plan, steps []plan.Change, have map[string]topology.Record) map[string]topology.Record {
	out := map[string]topology.Record{}
	for v, r := range have {
		next := r.Clone()
		next.Claims = plan.Claims(p, v)
		out[v] = next
	}
	for _, c := range steps {
		r, ok := out[c.Address.Vhost]
		if !ok || c.Address.Kind == topology.KindVhost {
			continue
		}
		switch c.Action {
		case plan.Create, plan.Replace:
			r.Owned[c.Address] = true
		case plan.Migrate:
			// The temporary queue is rmqtopo's while the migration runs,
			// and stays so if the apply stops before it finishes.
			r.Owned[c.Address] = true
			r.Owned[migrationQueue(c)] = true
		}
	}
	return out
}

// finalOf is the record after the apply: what was owned, plus what this
// apply created, minus what it deleted. Claims are those of the intent.
func finalOf(intent, had map[string]topology.Record, done []plan.Change) map[string]topology.Record {
	out := map[string]topology.Record{}
	for v, r := range had {
		next := r.Clone()
		next.Claims = intent[v].Claims
		out[v] = next
	}
	for _, c := range done {
		r, ok := out[c.Address.Vhost]
		if !ok {
			continue
		}
		switch c.Action {
		case plan.Create, plan.Replace:
			if c.Address.Kind != topology.KindVhost {
				r.Owned[c.Address] = true
			}
		case plan.Delete:
			delete(r.Owned, c.Address)
		case plan.Migrate:
			r.Owned[c.Address] = true
			delete(r.Owned, migrationQueue(c))
		}
	}
	return out
}

// writeRecords writes each record of next that differs from prev's, as
// the generation after the newest written so far. Intent is written before
// anything is created: a record naming an object that was never created
// is harmless, while an object created but never recorded would be
// someone else's forever. The final records are written even after a
// failure or an interrupt, with a context of their own, so that the
// records stay true to what exists.
func writeRecords(ctx context.Context, t Target, next, prev map[string]topology.Record) error {
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
	}
	var first error
	for _, v := range sortedKeys(next) {
		r := next[v]
		old := prev[v]
		if r.Generation <= old.Generation {
			r.Generation = old.Generation + 1
		}
		if sameRecord(r, old) {
			r.Generation = old.Generation
			next[v] = r
			continue
		}
		if err := t.PutRecord(ctx, r); err != nil && first == nil {
			first = fmt.Errorf("apply: %w", err)
			continue
		}
		next[v] = r
	}
	return first
}

// sameRecord reports whether two records say the same thing and their
// generation was written (a generation of 0 never was).
func sameRecord(a, b topology.Record) bool {
	if b.Generation == 0 || len(a.Claims) != len(b.Claims) || len(a.Owned) != len(b.Owned) {
		return false
	}
	for k, d := range a.Claims {
		if e, ok := b.Claims[k]; !ok || e != d {
			return false
		}
	}
	for k := range a.Owned {
		if !b.Owned[k] {
			return false
		}
	}
	return true
}

// notDone lists the steps not in done, in order.
func notDone(steps, done []plan.Change) []plan.Change {
	made := map[topology.Address]bool{}
	for _, c := range done {
		made[c.Address] = true
	}
	var out []plan.Change
	for _, c := range steps {
		if !made[c.Address] {
			out = append(out, c)
		}
	}
	return out
}

// count adds the changes done to r's counts.
func (r *Result) count(done []plan.Change) {
	for _, d := range done {
		switch d.Action {
		case plan.Create:
			r.Created++
		case plan.Replace:
			r.Replaced++
		case plan.Update:
			r.Updated++
		case plan.Delete:
			r.Deleted++
		case plan.Migrate:
			r.Migrated++
		}
	}
}

type runner struct {
	t     Target
	opts  Options
	total int
	count atomic.Int64
	mu    sync.Mutex
	done  []plan.Change
}

// phases runs steps, in order, one phase at a time, and stops at the end
// of the first phase with a failure.
func (r *runner) phases(ctx context.Context, steps []plan.Change) error {
	for i := 0; i < len(steps); {
		j := i
		for j < len(steps) && steps[j].Phase() == steps[i].Phase() {
			j++
		}
		if err := r.phase(ctx, steps[i:j]); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// phase runs one phase's changes with bounded concurrency (one at a time
// when the phase is not Concurrent). After the first
// failure no new change starts; those in flight finish.
func (r *runner) phase(ctx context.Context, steps []plan.Change) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan plan.Change)
	var (
		wg       sync.WaitGroup
		errMu    sync.Mutex
		errs     []error
		failures atomic.Int64
	)
	n := min(r.opts.Concurrency, len(steps))
	if !steps[0].Phase().Concurrent() {
		n = 1
	}
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				if err := r.exec(ctx, c); err != nil {
					if failures.Add(1) == 1 {
						cancel()
					}
					errMu.Lock()
					errs = append(errs, err)
					errMu.Unlock()
					continue
				}
				r.mu.Lock()
				r.done = append(r.done, c)
				r.mu.Unlock()
				done := int(r.count.Add(1))
				if r.opts.Progress != nil {
					r.opts.Progress(done, r.total)
				}
			}
		}()
	}
feed:
	for _, c := range steps {
		select {
		case work <- c:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if len(errs) == 0 {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("apply: interrupted during %s: %w", steps[0].Phase(), err)
		}
		return nil
	}
	// The first failure is the cause; the others are usually the
	// interruption it caused, or the same problem again.
	first := errs[0]
	for _, e := range errs {
		if !errors.Is(e, context.Canceled) {
			first = e
			break
		}
	}
	if more := int(failures.Load()) - 1; more > 0 {
		return fmt.Errorf("%w (and %d more failed changes)", first, more)
	}
	return first
}

func (r *runner) exec(ctx context.Context, c plan.Change) error {
	a := c.Address
	err := r.do(ctx, c)
	if err == nil {
		return nil
	}
	what := fmt.Sprintf("%s %s", verb(c), a)
	if r.opts.IsNotEmpty != nil && r.opts.IsNotEmpty(err) {
		return fmt.Errorf("apply: %s: stopped: %w; it was kept, because deleting it could lose messages that arrived after the plan was made or that its consumers hold; plan again", what, err)
	}
	return fmt.Errorf("apply: %s: %w", what, err)
}

func verb(c plan.Change) string {
	switch c.Action {
	case plan.Create:
		if c.Address.Kind == topology.KindBinding {
			return "bind"
		}
		return "create"
	case plan.Delete:
		if c.Address.Kind == topology.KindBinding {
			return "unbind"
		}
		return "delete"
	case plan.Replace:
		return "replace"
	case plan.Update:
		return "update"
	}
	return c.Action.String()
}

// do carries out one change, by the kind of object it acts on.
func (r *runner) do(ctx context.Context, c plan.Change) error {
	switch c.Address.Kind {
	case topology.KindVhost:
		return r.doVhost(ctx, c)
	case topology.KindExchange:
		return r.doExchange(ctx, c)
	case topology.KindQueue:
		return r.doQueue(ctx, c)
	case topology.KindBinding:
		return r.doBinding(ctx, c)
	case topology.KindPolicy:
		return r.doPolicy(ctx, c)
	}
	return errNoSuchOperation(c)
}

func errNoSuchOperation(c plan.Change) error {
	return fmt.Errorf("cannot %s a %s in place: RabbitMQ has no such operation", c.Action, c.Address.Kind)
}

func (r *runner) doVhost(ctx context.Context, c plan.Change) error {
	if c.Action != plan.Create {
		return fmt.Errorf("rmqtopo only creates vhosts; cannot %s one", c.Action)
	}
	if err := r.t.PutVhost(ctx, c.Address.Name); err != nil {
		return err
	}
	if r.opts.VhostCreated != nil {
		return r.opts.VhostCreated(ctx, c.Address.Name)
	}
	return nil
}

func (r *runner) doExchange(ctx context.Context, c plan.Change) error {
	a, after := c.Address, exchangeOf(c.After)
	switch c.Action {
	case plan.Delete:
		return r.t.DeleteExchange(ctx, a.Vhost, a.Name)
	case plan.Create, plan.Replace:
		if after == nil {
			return errMalformed
		}
		if c.Action == plan.Replace {
			if err := r.t.DeleteExchange(ctx, a.Vhost, a.Name); err != nil {
				return err
			}
		}
		return r.t.DeclareExchange(ctx, *after)
	}
	return errNoSuchOperation(c)
}

// doQueue guards every queue delete with if-empty unless destruction was
// allowed.
func (r *runner) doQueue(ctx context.Context, c plan.Change) error {
	before, after := queueOf(c.Before), queueOf(c.After)
	if before == nil {
		before = &topology.Queue{Vhost: c.Address.Vhost, Name: c.Address.Name}
	}
	ifEmpty := !r.opts.AllowDestroy
	switch c.Action {
	case plan.Migrate:
		return r.doMigrate(ctx, c)
	case plan.Delete:
		return r.t.DeleteQueue(ctx, *before, ifEmpty)
	case plan.Create, plan.Replace:
		if after == nil {
			return errMalformed
		}
		if c.Action == plan.Replace {
			if err := r.t.DeleteQueue(ctx, *before, ifEmpty); err != nil {
				return err
			}
		}
		return r.t.DeclareQueue(ctx, *after)
	}
	return errNoSuchOperation(c)
}

func (r *runner) doBinding(ctx context.Context, c plan.Change) error {
	before, after := bindingOf(c.Before), bindingOf(c.After)
	switch c.Action {
	case plan.Create:
		if after == nil {
			return errMalformed
		}
		return r.t.Bind(ctx, *after)
	case plan.Replace:
		if before == nil || after == nil {
			return errMalformed
		}
		if err := r.t.Unbind(ctx, *before); err != nil {
			return err
		}
		return r.t.Bind(ctx, *after)
	case plan.Delete:
		if before == nil {
			return errMalformed
		}
		return r.t.Unbind(ctx, *before)
	}
	return errNoSuchOperation(c)
}

func (r *runner) doPolicy(ctx context.Context, c plan.Change) error {
	after := policyOf(c.After)
	switch c.Action {
	case plan.Create, plan.Update, plan.Replace:
		if after == nil {
			return errMalformed
		}
		return r.t.PutPolicy(ctx, *after)
	case plan.Delete:
		return r.t.DeletePolicy(ctx, c.Address.Vhost, c.Address.Name)
	}
	return errNoSuchOperation(c)
}

var errMalformed = errors.New("malformed plan: the change lacks the object it acts on")

func exchangeOf(o *plan.Object) *topology.Exchange {
	if o == nil {
		return nil
	}
	return o.Exchange
}

func queueOf(o *plan.Object) *topology.Queue {
	if o == nil {
		return nil
	}
	return o.Queue
}

func bindingOf(o *plan.Object) *topology.Binding {
	if o == nil {
		return nil
	}
	return o.Binding
}

func policyOf(o *plan.Object) *topology.Policy {
	if o == nil {
		return nil
	}
	return o.Policy
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// String is a one-line account of a result, for people.
func (r Result) String() string {
	var parts []string
	add := func(n int, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(r.Created, "created")
	add(r.Replaced, "replaced")
	add(r.Updated, "updated")
	add(r.Deleted, "deleted")
	add(r.Migrated, "migrated")
	if len(parts) == 0 {
		return "nothing changed"
	}
	return strings.Join(parts, ", ")
}
