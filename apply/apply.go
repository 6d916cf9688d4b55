// Package apply carries out a plan against a broker.
//
// Apply never re-diffs: it executes the plan's changes, in dependency
// order, with bounded concurrency within each phase, and records what
// rmqtopo owns before it creates anything. Safety lives in two places: the
// plan's diagnostics (plan.Check) must have no blocking error, and every
// queue delete is guarded by the broker (if-empty) unless destruction was
// allowed, so messages that arrived after the plan was made stop the apply
// instead of being destroyed.
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
	// PutOwned replaces the record of the objects rmqtopo owns in vhost
	// with owned. Writing the same record twice is harmless.
	PutOwned(ctx context.Context, vhost string, owned []topology.Address) error
}

// DefaultConcurrency is how many changes of one phase are in flight at
// once; docs/benchmarks.md has the measurements behind it.
const DefaultConcurrency = 32

// Options tune an apply.
type Options struct {
	// Concurrency bounds the changes in flight within a phase; 0 means
	// DefaultConcurrency.
	Concurrency int
	// AllowDestroy accepts changes that destroy messages: the plan's
	// blocking diagnostics become warnings and queues are deleted without
	// the if-empty guard.
	AllowDestroy bool
	// Owned is the ownership record read with the plan's live state.
	Owned map[topology.Address]bool
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
	// Owned is the ownership record as written at the end.
	Owned map[topology.Address]bool
	// Elapsed is the wall time of the changes.
	Elapsed time.Duration
}

// Changes counts the changes made.
func (r Result) Changes() int { return r.Created + r.Updated + r.Replaced + r.Deleted + r.Migrated }

// ownerVhost is the vhost whose ownership record holds a.
func ownerVhost(a topology.Address) string {
	if a.Kind == topology.KindVhost {
		return a.Name
	}
	return a.Vhost
}

// Apply executes p's changes against t. It refuses a plan with blocking
// diagnostics (see plan.Check), records ownership of everything it is
// about to create before creating it, runs the phases, and records the
// final ownership even when a change fails. It stops at the end of the
// first phase with a failure and returns the first error, wrapped with the
// change it belongs to.
func Apply(ctx context.Context, t Target, p plan.Plan, opts Options) (Result, error) {
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if err := refuseBlocking(p, opts.AllowDestroy); err != nil {
		return Result{}, err
	}
	steps := ordered(p)
	res := Result{Owned: cloneSet(opts.Owned)}
	forgetFinishedMigrations(p, res.Owned)
	if len(steps) == 0 {
		return res, nil
	}
	vhosts, intent := intentOf(steps, res.Owned)
	keepMigrationQueues(steps, res.Owned)
	if err := writeIntent(ctx, t, vhosts, intent, res.Owned); err != nil {
		return res, err
	}
	r := &runner{t: t, opts: opts, total: len(steps)}
	start := time.Now()
	runErr := r.phases(ctx, steps)
	res.Elapsed = time.Since(start)
	res.count(r.done)
	if err := writeFinal(ctx, t, vhosts, intent, res.Owned); err != nil && runErr == nil {
		runErr = err
	}
	return res, runErr
}

// refuseBlocking refuses a plan that Check finds blocking diagnostics in.
func refuseBlocking(p plan.Plan, allowDestroy bool) error {
	blocking := plan.Blocking(plan.Check(p, plan.CheckOptions{AllowDestroy: allowDestroy}))
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

// intentOf returns the vhosts that steps touch and the ownership record as
// it will be once everything they create exists.
func intentOf(steps []plan.Change, owned map[topology.Address]bool) ([]string, map[topology.Address]bool) {
	touched := map[string]bool{}
	intent := cloneSet(owned)
	for _, c := range steps {
		touched[ownerVhost(c.Address)] = true
		if c.Action == plan.Create || c.Action == plan.Replace || c.Action == plan.Migrate {
			intent[c.Address] = true
		}
		if c.Action == plan.Migrate {
			// The temporary queue is rmqtopo's while the migration runs.
			intent[migrationQueue(c)] = true
		}
	}
	return sortedKeys(touched), intent
}

// writeIntent records intent before anything is created: a record naming
// objects that do not exist yet is harmless, while an object created but
// never recorded would be another's forever, never pruned.
func writeIntent(ctx context.Context, t Target, vhosts []string, intent, owned map[topology.Address]bool) error {
	for _, v := range vhosts {
		if !sameIn(v, intent, owned) {
			if err := t.PutOwned(ctx, v, inVhost(v, intent)); err != nil {
				return fmt.Errorf("apply: %w", err)
			}
		}
	}
	return nil
}

// writeFinal records what was owned, plus what this apply created, minus
// what it deleted. It is written even after a failure or an interrupt,
// with a context of its own, so that ownership stays exact whenever
// possible (the intent record covers the rest).
func writeFinal(ctx context.Context, t Target, vhosts []string, intent, owned map[topology.Address]bool) error {
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
	}
	var first error
	for _, v := range vhosts {
		if sameIn(v, intent, owned) {
			continue
		}
		if err := t.PutOwned(ctx, v, inVhost(v, owned)); err != nil && first == nil {
			first = fmt.Errorf("apply: %w", err)
		}
	}
	return first
}

// count adds the changes done to r's counts and ownership.
func (r *Result) count(done []plan.Change) {
	for _, d := range done {
		switch d.Action {
		case plan.Create:
			r.Created++
			r.Owned[d.Address] = true
		case plan.Replace:
			r.Replaced++
			r.Owned[d.Address] = true
		case plan.Update:
			r.Updated++
		case plan.Delete:
			r.Deleted++
			delete(r.Owned, d.Address)
		case plan.Migrate:
			r.Migrated++
			r.Owned[d.Address] = true
			delete(r.Owned, migrationQueue(d))
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

// phase runs one phase's changes with bounded concurrency. After the first
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
	return string(c.Action)
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
	case plan.Delete:
		return r.t.DeleteQueue(ctx, *before, ifEmpty)
	case plan.Migrate:
		return r.doMigrate(ctx, c)
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

func cloneSet(m map[topology.Address]bool) map[topology.Address]bool {
	out := make(map[topology.Address]bool, len(m))
	for k, v := range m {
		if v {
			out[k] = true
		}
	}
	return out
}

func inVhost(v string, m map[topology.Address]bool) []topology.Address {
	var out []topology.Address
	for a, ok := range m {
		if ok && ownerVhost(a) == v {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Less(out[j])
	})
	return out
}

// sameIn reports whether two ownership sets agree in vhost v.
func sameIn(v string, a, b map[topology.Address]bool) bool {
	x, y := inVhost(v, a), inVhost(v, b)
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if x[i] != y[i] {
			return false
		}
	}
	return true
}

func sortedKeys(m map[string]bool) []string {
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
	add(r.Migrated, "migrated")
	add(r.Updated, "updated")
	add(r.Deleted, "deleted")
	if len(parts) == 0 {
		return "nothing changed"
	}
	return strings.Join(parts, ", ")
}
