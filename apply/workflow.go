package apply

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rmqtopo/rmqtopo/apply/target"
	"github.com/rmqtopo/rmqtopo/internal/english"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/plan/planjson"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Backend is what the apply workflow (Run) runs against: a Target that
// writes, a Source that reads and counts, and the per-vhost apply lock.
// Their errors say their kind through package target's sentinels.
type Backend struct {
	// Target writes the changes; the lock is held by the same connection.
	Target target.Target
	// Source reads the state the plan is made from, and recounts a saved
	// plan's queues.
	Source plan.Source
	// Locker takes a vhost's apply lock for as long as Target lives.
	Locker target.Locker
}

// LockTimeoutError is a wait for a vhost's lock that another apply held
// for all of Request.LockTimeout. It unwraps to the last refusal, which
// wraps target.ErrLocked.
type LockTimeoutError struct {
	Vhost  string
	Waited time.Duration
	Err    error
}

func (e *LockTimeoutError) Error() string {
	return fmt.Sprintf("waited %s for the lock on vhost %q: %v", e.Waited, e.Vhost, e.Err)
}

func (e *LockTimeoutError) Unwrap() error { return e.Err }

// Clock is the time the workflow waits with; tests pass a fake one so that
// lock waits take no real time.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Request is one apply: either a saved plan or a desired topology with the
// user's choices.
type Request struct {
	// Saved is a plan saved with `plan --out`, read from SavedPath; nil
	// to plan Desired with Choices instead.
	Saved     *planjson.File
	SavedPath string
	Desired   topology.Topology
	Choices   plan.Choices
	// LockTimeout bounds the wait for a lock another apply holds; 0 fails
	// at once.
	LockTimeout time.Duration
	// OnLockWait, if set, is called once when the wait for a vhost's lock
	// begins; latest returns the latest refusal, which names the holder
	// once the broker's statistics do (seconds after the lock was taken),
	// and may be called until the wait ends. The end OnLockWait returns,
	// if not nil, is called when the wait ends, the lock taken or not.
	OnLockWait func(vhost string, latest func() error) (end func())
	// Review is called with the plan and the state it was made from,
	// under the locks, before anything is written: it checks (and may
	// note on the plan the version it judged by), shows and confirms, and
	// returns the plan's diagnostics, which Apply refuses by
	// (Options.Diagnostics). An error stops the apply with nothing written.
	Review func(p *plan.Plan, st *topology.State) ([]plan.Diagnostic, error)
	// Options tune Apply; Records and VhostCreated are set by Run.
	Options Options
	// Clock defaults to the real one.
	Clock Clock
}

// Outcome is what Run planned and did.
type Outcome struct {
	Plan   plan.Plan
	State  *topology.State
	Result Result
	// Applied is set once Apply ran, even if it failed.
	Applied bool
}

// Run is the apply workflow: it locks the vhosts, plans (or reads the
// state of a saved plan, refusing it if it is stale, and recounts its
// queues), has the plan reviewed and applies it. Locking comes before
// reading, so that the state planned from is the state applied to.
func Run(ctx context.Context, b Backend, req Request) (Outcome, error) {
	if req.Clock == nil {
		req.Clock = realClock{}
	}
	w := &workflow{b: b, req: req, locked: map[string]bool{}}
	if req.Options.Progress != nil {
		req.Options.Progress(Progress{Step: StepPlanning})
	}
	p, st, err := w.lockAndPlan(ctx)
	if err != nil {
		return Outcome{}, err
	}
	if req.Saved != nil {
		if p, err = w.checkSaved(ctx, st); err != nil {
			return Outcome{}, err
		}
	}
	opts := req.Options
	if req.Review != nil {
		diags, err := req.Review(&p, st)
		if err != nil {
			return Outcome{Plan: p, State: st}, err
		}
		opts.Diagnostics = diags
	}
	out := Outcome{Plan: p, State: st}
	opts.Records = plan.OwnRecords(st, req.Choices.Specs)
	opts.VhostCreated = w.vhostCreated
	out.Result, err = Apply(ctx, b.Target, p, opts)
	out.Applied = true
	return out, err
}

// workflow is one apply's hold on the broker: the vhosts it has locked.
type workflow struct {
	b      Backend
	req    Request
	locked map[string]bool
}

// lock takes the apply lock of each existing vhost of vs not yet locked.
func (w *workflow) lock(ctx context.Context, vs []string) error {
	for _, v := range vs {
		if w.locked[v] {
			continue
		}
		err := w.waitLock(ctx, v)
		if errors.Is(err, target.ErrVhostNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		w.locked[v] = true
	}
	return nil
}

// waitLock takes vhost's lock, waiting up to LockTimeout while another
// apply holds it. The lock is an exclusive queue, so there is nothing to
// wait on but the queue itself: it polls, at most every two seconds.
func (w *workflow) waitLock(ctx context.Context, vhost string) error {
	clock, timeout := w.req.Clock, w.req.LockTimeout
	deadline := clock.Now().Add(timeout)
	pause := 100 * time.Millisecond
	var end func()
	defer func() {
		if end != nil {
			end()
		}
	}()
	var latest lastError
	for said := false; ; said = true {
		err := w.b.Locker.Lock(ctx, vhost)
		latest.set(err)
		if !errors.Is(err, target.ErrLocked) || timeout == 0 {
			return err
		}
		left := deadline.Sub(clock.Now())
		if left <= 0 {
			return &LockTimeoutError{Vhost: vhost, Waited: timeout, Err: err}
		}
		if !said && w.req.OnLockWait != nil {
			end = w.req.OnLockWait(vhost, latest.get)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-clock.After(min(pause, left)):
		}
		pause = min(2*pause, 2*time.Second)
	}
}

// lastError is the latest of a series of errors, read from another
// goroutine (a progress line's).
type lastError struct {
	mu  sync.Mutex
	err error
}

func (l *lastError) set(err error) { l.mu.Lock(); l.err = err; l.mu.Unlock() }
func (l *lastError) get() error    { l.mu.Lock(); defer l.mu.Unlock(); return l.err }

// lockAndPlan locks before reading, then reads (for a saved plan) or plans
// (for specs). A vhost created by someone else between the lock and the
// read is locked and read again; a vhost that does not exist yet is locked
// as soon as this apply creates it (see vhostCreated).
func (w *workflow) lockAndPlan(ctx context.Context) (plan.Plan, *topology.State, error) {
	vhosts := w.req.Desired.VhostNames()
	if w.req.Saved != nil {
		vhosts = w.req.Saved.Vhosts
	}
	if err := w.lock(ctx, vhosts); err != nil {
		return plan.Plan{}, nil, err
	}
	for attempt := 0; ; attempt++ {
		var (
			p   plan.Plan
			st  *topology.State
			err error
		)
		if w.req.Saved != nil {
			st, err = w.b.Source.Read(ctx, vhosts)
		} else {
			p, st, err = plan.Make(ctx, w.b.Source, w.req.Desired, w.req.Choices)
		}
		if err != nil {
			return plan.Plan{}, nil, err
		}
		var unlocked []string
		for _, v := range st.Topology.Vhosts {
			if !w.locked[v] {
				unlocked = append(unlocked, v)
			}
		}
		if len(unlocked) == 0 || attempt > 0 {
			return p, st, nil
		}
		if err := w.lock(ctx, unlocked); err != nil {
			return plan.Plan{}, nil, err
		}
	}
}

// checkSaved refuses a saved plan whose broker changed since it was made,
// and gives the plan with the counts at stake now: counts change all the
// time and are not part of the fingerprint.
func (w *workflow) checkSaved(ctx context.Context, st *topology.State) (plan.Plan, error) {
	saved := w.req.Saved
	if saved.Stale(st) {
		return plan.Plan{}, fmt.Errorf("the plan in %s is stale: the broker's topology or ownership record changed since it was made (%s); run plan again",
			w.req.SavedPath, saved.CreatedAt.Format(time.RFC3339))
	}
	p := saved.Plan
	if err := plan.Recount(ctx, w.b.Source, &p); err != nil {
		return plan.Plan{}, err
	}
	return p, nil
}

// vhostCreated locks a vhost this apply has just created. The plan was
// made when the vhost did not exist: if another apply created and filled
// it meanwhile, this plan is stale.
func (w *workflow) vhostCreated(ctx context.Context, vhost string) error {
	if w.locked[vhost] {
		return nil
	}
	if err := w.b.Locker.Lock(ctx, vhost); err != nil {
		return err
	}
	st, err := w.b.Source.Read(ctx, []string{vhost})
	if err != nil {
		return err
	}
	t := st.Topology
	if n := len(t.Exchanges) + len(t.Queues) + len(t.Policies); n > 0 {
		return fmt.Errorf("vhost %q appeared with %s since the plan was made; plan again", vhost, english.Count(n, "object", "objects"))
	}
	return nil
}
