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
	"fmt"
	"sort"
	"time"

	"github.com/rmqtopo/rmqtopo/apply/target"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

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
	// Progress, if set, is called as the apply goes: when it records
	// ownership and after each change. It is called concurrently.
	Progress func(Progress)
	// VhostCreated, if set, is called right after a vhost is created and
	// before anything is created in it; the CLI takes the vhost's lock
	// there. An error stops the apply.
	VhostCreated func(ctx context.Context, vhost string) error
}

// Progress is what an apply reports while it runs.
type Progress struct {
	// Step is what it is doing: StepRecords, or the phase of the change
	// just made (plan.Phase's name).
	Step string
	// Done of Total changes are made.
	Done, Total int
}

// Steps of Progress besides the phases of changes.
const (
	StepPlanning = "reading the broker and planning"
	StepRecords  = "recording ownership"
)

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
func Apply(ctx context.Context, t target.Target, p plan.Plan, opts Options) (Result, error) {
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
			return res, fmt.Errorf("no ownership record of the spec for vhost %q was given; refusing to change what could not be recorded", c.Address.Vhost)
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
		r.report(StepRecords, int(r.count.Load()))
		runErr = writeRecords(ctx, t, intent, res.Records)
	}
	if runErr == nil {
		runErr = r.phases(ctx, steps[n:])
	}
	res.Elapsed = time.Since(start)
	final := finalOf(p, intent, res.Records, r.done)
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
	return fmt.Errorf("refusing: %s", msg)
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
