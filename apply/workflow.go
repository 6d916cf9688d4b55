package apply

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/plan/planfile"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Broker is what the apply workflow (Run) needs of a broker: a Target that
// writes, a Source that reads and counts, the per-vhost apply lock, and
// recognisers of the broker's errors. apply cannot import the broker
// package (it runs against any Target), so the caller names them.
type Broker struct {
	// Target writes the changes; the lock is held by the same connection.
	Target Target
	// Source reads the state the plan is made from, and recounts a saved
	// plan's queues.
	Source plan.Source
	// Lock takes a vhost's apply lock for as long as Target lives. It
	// fails at once, with an error Errors.Locked recognises, when another
	// apply holds it.
	Lock func(ctx context.Context, vhost string) error
	// Errors recognise the broker's errors.
	Errors Errors
}

// Errors recognise kinds of broker errors; a nil recogniser recognises
// none.
type Errors struct {
	// Locked: another apply holds the vhost's lock.
	Locked func(error) bool
	// VhostNotFound: the vhost does not exist (nothing to lock).
	VhostNotFound func(error) bool
	// NotEmpty: a guarded queue delete found messages or consumers.
	NotEmpty func(error) bool
	// Connection: the broker could not be reached or answered with a
	// server error; trying again later may succeed.
	Connection func(error) bool
	// NodeDown: a cluster node is down.
	NodeDown func(error) bool
}

func is(f func(error) bool, err error) bool { return f != nil && f(err) }

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
	Saved     *planfile.File
	SavedPath string
	Desired   topology.Topology
	Choices   plan.Choices
	// LockTimeout bounds the wait for a lock another apply holds; 0 fails
	// at once.
	LockTimeout time.Duration
	// OnLockWait, if set, is called once when the wait for a vhost's lock
	// begins.
	OnLockWait func(vhost string)
	// Review is called with the plan and the state it was made from,
	// under the locks, before anything is written: it checks (and may
	// note on the plan the version it judged by), shows and confirms, and
	// returns the plan's diagnostics, which Apply refuses by
	// (Options.Diagnostics). An error stops the apply with nothing written.
	Review func(p *plan.Plan, st *topology.State) ([]plan.Diagnostic, error)
	// Options tune Apply; Records, VhostCreated and IsNotEmpty are set by
	// Run.
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
func Run(ctx context.Context, b Broker, req Request) (Outcome, error) {
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
	opts.IsNotEmpty = b.Errors.NotEmpty
	opts.VhostCreated = w.vhostCreated
	out.Result, err = Apply(ctx, b.Target, p, opts)
	out.Applied = true
	return out, err
}

// workflow is one apply's hold on the broker: the vhosts it has locked.
type workflow struct {
	b      Broker
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
		if is(w.b.Errors.VhostNotFound, err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("apply: %w", err)
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
	for said := false; ; said = true {
		err := w.b.Lock(ctx, vhost)
		if !is(w.b.Errors.Locked, err) || timeout == 0 {
			return err
		}
		left := deadline.Sub(clock.Now())
		if left <= 0 {
			return fmt.Errorf("waited %s (--lock-timeout): %w", timeout, err)
		}
		if !said && w.req.OnLockWait != nil {
			w.req.OnLockWait(vhost)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-clock.After(min(pause, left)):
		}
		pause = min(2*pause, 2*time.Second)
	}
}

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
			return plan.Plan{}, nil, fmt.Errorf("apply: %w", err)
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
		return plan.Plan{}, fmt.Errorf("apply: the plan in %s is stale: the broker's topology or ownership record changed since it was made (%s); run plan again",
			w.req.SavedPath, saved.CreatedAt.Format(time.RFC3339))
	}
	p := saved.Plan
	if err := plan.Recount(ctx, w.b.Source, &p); err != nil {
		return plan.Plan{}, fmt.Errorf("apply: %w", err)
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
	if err := w.b.Lock(ctx, vhost); err != nil {
		return err
	}
	st, err := w.b.Source.Read(ctx, []string{vhost})
	if err != nil {
		return err
	}
	t := st.Topology
	if n := len(t.Exchanges) + len(t.Queues) + len(t.Policies); n > 0 {
		return fmt.Errorf("vhost %q appeared with %d objects since the plan was made; plan again", vhost, n)
	}
	return nil
}

// NotDone says what an apply that stopped with err did not do, and
// whether running it again can finish: not when the broker refused a
// change, which will refuse again until the spec or the broker changes.
func (e Errors) NotDone(res Result, err error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d changes not made", len(res.NotDone))
	for i, c := range res.NotDone {
		if i == 3 {
			fmt.Fprintf(&b, ", and %d more", len(res.NotDone)-3)
			break
		}
		sep := ","
		if i == 0 {
			sep = ":"
		}
		fmt.Fprintf(&b, "%s %s %s", sep, c.Action, c.Address)
	}
	b.WriteString(". The ownership record lists what exists. ")
	switch {
	case is(e.Connection, err):
		b.WriteString("The connection failed: planning and applying again finishes the job once the broker is reachable.")
	case is(e.NodeDown, err):
		b.WriteString("A cluster node is down (above): planning and applying again finishes the job once it is back.")
	case is(e.NotEmpty, err), is(e.Locked, err):
		b.WriteString("Plan again once the cause above is gone.")
	default:
		b.WriteString("The broker refused a change: applying again will fail the same way until the spec or the broker changes.")
	}
	return b.String()
}
