package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/rmqtopo/rmqtopo/apply"
	"github.com/rmqtopo/rmqtopo/apply/target"
	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/internal/exitcode"
	"github.com/rmqtopo/rmqtopo/internal/failpoint"
	"github.com/rmqtopo/rmqtopo/internal/progress"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/plan/planjson"
	"github.com/rmqtopo/rmqtopo/topology"
)

var (
	_ target.Target = (*broker.Session)(nil)
	_ target.Locker = (*broker.Session)(nil)
)

type applyCmd struct {
	Files        []string      `arg:"" name:"FILE" help:"Spec files (one vhost each), or one plan saved with 'rmqtopo plan --out'."`
	AutoApprove  bool          `name:"auto-approve" help:"Apply without asking for confirmation (a saved plan never asks: saving it was the approval)."`
	Prune        bool          `help:"Delete objects rmqtopo created that left the spec."`
	AllowDestroy bool          `name:"allow-destroy" help:"Accept changes that destroy messages: queue replaces and deletes run without the if-empty guard."`
	Migrate      bool          `help:"Migrate queues that would be replaced: move their messages out with confirms, re-create them and move the messages back."`
	Concurrency  int           `help:"Changes in flight at once within each phase." default:"32"`
	LockTimeout  time.Duration `name:"lock-timeout" help:"Wait up to this long for another apply's lock on a vhost (0: fail at once)." default:"0s"`
	Conn         connFlags     `embed:""`
}

// Validate refuses flag values before anything is read.
func (c *applyCmd) Validate() error {
	if c.LockTimeout < 0 {
		return fmt.Errorf("--lock-timeout must not be negative, got %s", c.LockTimeout)
	}
	return nil
}

// stdinIsTerminal reports whether apply may ask for confirmation; tests
// replace it.
var stdinIsTerminal = func(r io.Reader) bool { return isTerminal(r) }

func (c *applyCmd) Run(e *env) (err error) {
	var notes layoutNotes
	saved, desired, ch, err := c.input(e, &notes)
	if err != nil {
		return err
	}
	// Started before the broker is first asked, so that a broker slow to
	// answer is named as such from the start (Reporter.Wait).
	report := progress.Start(e.stderr, progress.Options[apply.Progress]{
		Line: applyProgressLine, Terminal: isTerminal(e.stderr), Every: 2, Keep: func(last, next apply.Progress) bool { return next.Newer(last) },
		WaitLine: applyWaitLine})
	defer report.Stop()
	client, err := c.Conn.waitingClient(e, report.Wait)
	if err != nil {
		return err
	}
	sess, err := client.NewSession(e.ctx)
	if err != nil {
		return err
	}
	e.hide(sess.Secrets)
	defer sess.Close()
	mw := &migrationWait{start: report.WaitFunc}
	hook, waitLog := migrateHook(e), broker.MigrationWaitLog(e.stderr)
	sess.MigrateHook = func(queue, step string, moved int) { mw.end(); hook(queue, step, moved) }
	sess.MigrateWait = func(queue, what string) { waitLog(queue, what); mw.set(queue, what) }
	defer mw.end()

	b := apply.Backend{Target: sess, Source: client, Locker: sess}
	out, err := apply.Run(e.ctx, b, apply.Request{
		Saved: saved, SavedPath: c.Files[0], Desired: desired, Choices: ch,
		LockTimeout: c.LockTimeout,
		OnLockWait: func(vhost string, latest func() error) func() {
			fmt.Fprintf(e.stderr, "waiting up to %s (--lock-timeout) for the lock on vhost %q, held by %s\n", c.LockTimeout, vhost, lockHolder(latest()))
			return report.WaitFunc(func() string {
				return fmt.Sprintf("the lock on vhost %q, held by %s, up to %s", vhost, lockHolder(latest()), c.LockTimeout)
			})
		},
		Review: func(p *plan.Plan, st *topology.State) ([]plan.Diagnostic, error) {
			report.Pause()
			return c.review(e, client, saved != nil, plan.CheckOptions{AllowDestroy: c.AllowDestroy, Specs: ch.Specs, Kept: notes.kept, Routes: notes.routes}, p, st)
		},
		Options: apply.Options{Concurrency: c.Concurrency, AllowDestroy: c.AllowDestroy, Progress: changesHook(report.Update)},
	})
	report.Stop()
	res := out.Result
	switch {
	case err != nil && out.Applied:
		fmt.Fprintf(e.stderr, "Apply stopped after %s: %s; %s\n", res.Elapsed.Round(time.Millisecond), resultText(res), notDoneText(res, err))
		return err
	case err != nil:
		return applyError(err)
	case out.Plan.HasChanges():
		fmt.Fprintf(e.stdout, "\nApply complete: %s in %s.\n", resultText(res), res.Elapsed.Round(time.Millisecond))
	}
	return nil
}

// review checks the plan apply is about to carry out, shows it and asks
// for approval, and returns its diagnostics, which Apply refuses by; an
// error stops the apply before anything is written.
func (c *applyCmd) review(e *env, client *broker.Client, saved bool, check plan.CheckOptions, p *plan.Plan, st *topology.State) ([]plan.Diagnostic, error) {
	// apply has no --rabbitmq-version: it judges by the broker it writes to.
	diags, err := review(e, p, st, client, plan.ReviewOptions{
		Check: check, From: "broker", Writer: true,
	})
	if err != nil {
		return nil, err
	}
	if err := renderPlan(e, "text", *p, diags); err != nil {
		return nil, err
	}
	if !p.HasChanges() {
		// Nothing to change; the spec's record may still need to claim
		// objects that exist already, which asks for no approval.
		return diags, nil
	}
	if b := plan.Blocking(diags); len(b) > 0 {
		// The exit plan --detailed-exitcode gives the same plan, so that a
		// pipeline tells a refusal from a failure. An ExitError says all
		// it means: it names the command itself.
		return nil, &ExitError{Code: exitcode.Refused, Err: fmt.Errorf("apply: %w", blockingError(b))}
	}
	// A saved plan was reviewed and approved when it was saved, and it
	// is refused above if the broker changed since: asking again would
	// only break the pipelines that apply it (Terraform does not either).
	if !c.AutoApprove && !saved {
		return diags, confirm(e)
	}
	return diags, nil
}

// input reads what apply applies: a saved plan (one file whose kind says
// so) or spec files, expanded for the broker's state (layouts; notes
// receives what the plan's checks say of the layouts).
func (c *applyCmd) input(e *env, notes *layoutNotes) (*planjson.File, topology.Topology, plan.Choices, error) {
	if len(c.Files) == 1 {
		saved, err := planjson.Read(c.Files[0])
		if err != nil {
			return nil, topology.Topology{}, plan.Choices{}, planfileError(err)
		}
		if saved != nil {
			switch {
			case c.Prune:
				return nil, topology.Topology{}, plan.Choices{}, errors.New("--prune does not apply to a saved plan: it was decided when the plan was made (plan --prune --out FILE)")
			case c.Migrate:
				return nil, topology.Topology{}, plan.Choices{}, errors.New("--migrate does not apply to a saved plan: it was decided when the plan was made (plan --migrate --out FILE)")
			case len(saved.Specs) == 0:
				return nil, topology.Topology{}, plan.Choices{}, fmt.Errorf("the plan in %s was saved by an earlier rmqtopo and names no spec, whose ownership record apply must write; run plan again", c.Files[0])
			}
			return saved, topology.Topology{}, plan.Choices{Specs: saved.Specs}, nil
		}
	}
	files, desired, err := loadExpanded(e, c.Files)
	if err != nil {
		return nil, topology.Topology{}, plan.Choices{}, err
	}
	ch := choices(files, c.Prune, c.Migrate)
	ch.Expand = layouts(files, "", "broker", notes)
	return nil, desired, ch, nil
}

// confirm asks for "yes" on a terminal and refuses to guess otherwise.
func confirm(e *env) error {
	if !stdinIsTerminal(e.stdin) {
		return errors.New("stdin is not a terminal, so it cannot ask for confirmation; pass --auto-approve to apply without asking")
	}
	fmt.Fprint(e.stderr, "\nDo you want to apply these changes? Only 'yes' will be accepted.\n  Enter a value: ")
	line, err := bufio.NewReader(e.stdin).ReadString('\n')
	if err != nil && line == "" {
		return errors.New("no answer; nothing was changed")
	}
	if strings.TrimSpace(line) != "yes" {
		return &ExitError{Code: exitcode.Failure, Err: errors.New("apply cancelled; nothing was changed")}
	}
	return nil
}

// changesHook passes apply's progress on, honouring the failpoint
// "changes:N" (killed once N changes are made, whatever the time).
func changesHook(report func(apply.Progress)) func(apply.Progress) {
	kill := failpoint.KillAt()
	return func(p apply.Progress) {
		if p.Step != apply.StepPlanning && p.Step != apply.StepRecords {
			kill("changes", p.Done)
		}
		report(p)
	}
}

// migrateHook reports each step of a migration on stderr and honours
// the failpoint.
func migrateHook(e *env) func(queue, step string, moved int) {
	kill, log := failpoint.KillAt(), broker.MigrationLog(e.stderr)
	return func(queue, step string, moved int) {
		kill(step, moved)
		log(queue, step, moved)
	}
}

// migrationWait shows a migration's wait for what its old queue still
// holds as the progress line's wait ("apply: waiting for 3 retries queue
// "cw" holds ..."), from the migration's first report of it until its next
// step: the phase of the last change made is not what apply is doing then.
type migrationWait struct {
	start func(what func() string) (end func())
	mu    sync.Mutex
	what  string
	stop  func()
}

// set makes what (a "waiting for ..." line of queue's migration) the
// progress line's wait.
func (w *migrationWait) set(queue, what string) {
	w.mu.Lock()
	w.what = fmt.Sprintf("%s (migrating queue %q)", strings.TrimPrefix(what, "waiting for "), queue)
	started := w.stop != nil
	w.mu.Unlock()
	if started {
		return
	}
	stop := w.start(w.text) // outside the lock: it may ask for the text
	w.mu.Lock()
	w.stop = stop
	w.mu.Unlock()
}

func (w *migrationWait) text() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.what
}

// end ends the wait, if one is shown.
func (w *migrationWait) end() {
	w.mu.Lock()
	stop := w.stop
	w.stop = nil
	w.mu.Unlock()
	if stop != nil {
		stop()
	}
}
