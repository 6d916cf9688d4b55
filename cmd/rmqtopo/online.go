package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/rmqtopo/rmqtopo/apply"
	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/internal/definitions"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/plan/planfile"
	"github.com/rmqtopo/rmqtopo/render"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

var _ apply.Target = (*broker.Session)(nil)

type planCmd struct {
	Files            []string          `arg:"" name:"FILE" help:"Spec files (one vhost each)."`
	Format           string            `short:"f" help:"Output format: text, json or markdown." enum:"text,json,markdown" default:"text"`
	DetailedExitcode bool              `name:"detailed-exitcode" help:"Exit 0 when there are no changes, 2 when there are, 4 when apply would refuse them, 1 on error (see docs/exit-codes.md)."`
	Out              string            `name:"out" placeholder:"FILE" help:"Save the plan to FILE, for 'rmqtopo apply FILE'."`
	Against          string            `name:"against" placeholder:"FILE|empty" help:"Plan against a definitions export (rabbitmqctl export_definitions, GET /api/definitions) or an empty broker instead of a live one; needs no credentials."`
	Prune            bool              `help:"Delete objects rmqtopo created that left the spec."`
	AllowDestroy     bool              `name:"allow-destroy" help:"Accept changes that destroy messages (queue replaces and deletes)."`
	Migrate          bool              `help:"Migrate queues that would be replaced: move their messages out with confirms, re-create them and move the messages back."`
	Conn             connFlags         `embed:""`
	Version          rabbitVersionFlag `embed:""`
}

// Validate refuses flag combinations before anything is read.
func (c *planCmd) Validate() error {
	if c.Against != "" && c.Out != "" {
		return errors.New("plan: --out needs a live broker, not --against: a saved plan is checked against the broker it was made from")
	}
	return nil
}

func (c *planCmd) Run(e *env) (err error) {
	files, desired, err := loadExpanded(e, c.Files)
	if err != nil {
		return err
	}
	specs := spec.Names(files)
	var (
		src       plan.Source = definitions.FileSource{Path: c.Against}
		brokerURL string
		client    *broker.Client
	)
	if c.Against == "" {
		client, err = c.Conn.client(e)
		if err != nil {
			return err
		}
		defer func() { err = scrub(err, client.Secrets()) }()
		src, brokerURL = client, client.URL()
	}
	p, st, err := plan.MakeWith(e.ctx, src, desired, choices(files, c.Prune, c.Migrate))
	if err != nil {
		if c.Against != "" {
			return fmt.Errorf("plan: --against: %w", err)
		}
		return fmt.Errorf("plan: %w", err)
	}
	from := "broker"
	if c.Against != "" {
		from = "export"
	}
	diags, err := checkPlan(e, &p, st, client, c.Version, from, plan.CheckOptions{AllowDestroy: c.AllowDestroy, Specs: specs}, false)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	if err := renderPlan(e, c.Format, p, diags); err != nil {
		return err
	}
	blocking := plan.Blocking(diags)
	// A plan the broker would refuse is not worth saving: no flag of
	// apply accepts it.
	if c.Out != "" && len(plan.Refusals(blocking)) == 0 {
		if err := planfile.New(brokerURL, st, specs, c.Prune, p, diags).Write(c.Out); err != nil {
			return fmt.Errorf("plan: %w", err)
		}
		fmt.Fprintf(e.stderr, "Saved the plan to %s; apply it with: rmqtopo apply %s\n", c.Out, c.Out)
	}
	if len(blocking) > 0 {
		err := plan.BlockingError("plan", blocking)
		if c.DetailedExitcode {
			return &ExitError{Code: ExitRefused, Err: err}
		}
		return err
	}
	if c.DetailedExitcode && p.HasChanges() {
		return &ExitError{Code: ExitChanges}
	}
	return nil
}

// renderPlan writes p in the chosen format: text, json or markdown.
func renderPlan(e *env, format string, p plan.Plan, diags []plan.Diagnostic) error {
	switch format {
	case "json":
		return render.PlanJSON(e.stdout, p, diags)
	case "markdown":
		return render.PlanMarkdown(e.stdout, p, diags)
	default:
		return render.PlanText(e.stdout, p, diags, e.color)
	}
}

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
	saved, desired, ch, err := c.input(e)
	if err != nil {
		return err
	}
	client, err := c.Conn.client(e)
	if err != nil {
		return err
	}
	secrets := client.Secrets()
	defer func() { err = scrub(err, secrets) }()
	sess, err := client.NewSession(e.ctx)
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	secrets = sess.Secrets()
	defer sess.Close()

	a := &applying{e: e, client: client, sess: sess, locked: map[string]bool{}, lockTimeout: c.LockTimeout}
	sess.MigrateHook = migrateHook(e)
	p, st, err := a.lockAndPlan(saved, desired, ch)
	if err != nil {
		return err
	}
	if saved != nil {
		if p, err = a.checkSaved(saved, c.Files[0], st); err != nil {
			return err
		}
	}
	specs := ch.Specs
	// apply has no --rabbitmq-version: it judges by the broker it writes to.
	diags, err := checkPlan(e, &p, st, client, rabbitVersionFlag{}, "broker", plan.CheckOptions{AllowDestroy: c.AllowDestroy, Specs: specs}, true)
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	if err := render.PlanText(e.stdout, p, diags, e.color); err != nil {
		return err
	}
	if !p.HasChanges() {
		// Nothing to change; the spec's record may still need to claim
		// objects that exist already, which asks for no approval.
		return a.run(p, st, specs, c.Concurrency, c.AllowDestroy, diags)
	}
	if b := plan.Blocking(diags); len(b) > 0 {
		return plan.BlockingError("apply", b)
	}
	// A saved plan was reviewed and approved when it was saved, and it
	// is refused above if the broker changed since: asking again would
	// only break the pipelines that apply it (Terraform does not either).
	if !c.AutoApprove && saved == nil {
		if err := confirm(e); err != nil {
			return err
		}
	}
	return a.run(p, st, specs, c.Concurrency, c.AllowDestroy, diags)
}

// input reads what apply applies: a saved plan (one file whose kind says
// so) or spec files, expanded.
func (c *applyCmd) input(e *env) (*planfile.File, topology.Topology, plan.Choices, error) {
	if len(c.Files) == 1 {
		saved, err := planfile.Read(c.Files[0])
		if err != nil {
			return nil, topology.Topology{}, plan.Choices{}, fmt.Errorf("apply: %w", err)
		}
		if saved != nil {
			switch {
			case c.Prune:
				return nil, topology.Topology{}, plan.Choices{}, errors.New("apply: --prune does not apply to a saved plan: it was decided when the plan was made (plan --prune --out FILE)")
			case c.Migrate:
				return nil, topology.Topology{}, plan.Choices{}, errors.New("apply: --migrate does not apply to a saved plan: it was decided when the plan was made (plan --migrate --out FILE)")
			case len(saved.Specs) == 0:
				return nil, topology.Topology{}, plan.Choices{}, fmt.Errorf("apply: the plan in %s was saved by an earlier rmqtopo and names no spec, whose ownership record apply must write; run plan again", c.Files[0])
			}
			return saved, topology.Topology{}, plan.Choices{Specs: saved.Specs}, nil
		}
	}
	files, desired, err := loadExpanded(e, c.Files)
	if err != nil {
		return nil, topology.Topology{}, plan.Choices{}, err
	}
	return nil, desired, choices(files, c.Prune, c.Migrate), nil
}

// applying is one apply's hold on the broker: its client, its session
// (the AMQP connection that writes and holds the locks) and the vhosts it
// has locked.
type applying struct {
	e      *env
	client *broker.Client
	sess   *broker.Session
	locked map[string]bool
	// lockTimeout bounds the wait for a lock another apply holds.
	lockTimeout time.Duration
}

// lock takes the apply lock of each existing vhost of vs not yet locked.
func (a *applying) lock(vs []string) error {
	for _, v := range vs {
		if a.locked[v] {
			continue
		}
		err := a.waitLock(v)
		if errors.Is(err, broker.ErrVhostNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("apply: %w", err)
		}
		a.locked[v] = true
	}
	return nil
}

// waitLock takes vhost's lock, waiting up to lockTimeout while another
// apply holds it. The lock is an exclusive queue, so there is nothing to
// wait on but the queue itself: it polls, at most every two seconds.
func (a *applying) waitLock(vhost string) error {
	deadline := time.Now().Add(a.lockTimeout)
	pause := 100 * time.Millisecond
	for said := false; ; said = true {
		err := a.sess.Lock(a.e.ctx, vhost)
		if !errors.Is(err, broker.ErrLocked) || a.lockTimeout == 0 {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("waited %s (--lock-timeout): %w", a.lockTimeout, err)
		}
		if !said {
			fmt.Fprintf(a.e.stderr, "waiting up to %s for another apply's lock on vhost %q\n", a.lockTimeout, vhost)
		}
		select {
		case <-a.e.ctx.Done():
			return a.e.ctx.Err()
		case <-time.After(min(pause, left)):
		}
		pause = min(2*pause, 2*time.Second)
	}
}

// lockAndPlan locks before reading, so that the state planned from is the
// state applied to, then reads (for a saved plan) or plans (for specs). A
// vhost created by someone else between the lock and the read is locked
// and read again; a vhost that does not exist yet is locked as soon as
// this apply creates it (see vhostCreated).
func (a *applying) lockAndPlan(saved *planfile.File, desired topology.Topology, ch plan.Choices) (plan.Plan, *topology.State, error) {
	vhosts := desired.VhostNames()
	if saved != nil {
		vhosts = saved.Vhosts
	}
	if err := a.lock(vhosts); err != nil {
		return plan.Plan{}, nil, err
	}
	for attempt := 0; ; attempt++ {
		var (
			p   plan.Plan
			st  *topology.State
			err error
		)
		if saved != nil {
			st, err = a.client.Read(a.e.ctx, vhosts)
		} else {
			p, st, err = plan.MakeWith(a.e.ctx, a.client, desired, ch)
		}
		if err != nil {
			return plan.Plan{}, nil, fmt.Errorf("apply: %w", err)
		}
		var unlocked []string
		for _, v := range st.Topology.Vhosts {
			if !a.locked[v] {
				unlocked = append(unlocked, v)
			}
		}
		if len(unlocked) == 0 || attempt > 0 {
			return p, st, nil
		}
		if err := a.lock(unlocked); err != nil {
			return plan.Plan{}, nil, err
		}
	}
}

// checkSaved refuses a saved plan whose broker changed since it was made,
// and gives the plan with the counts at stake now: counts change all the
// time and are not part of the fingerprint.
func (a *applying) checkSaved(saved *planfile.File, path string, st *topology.State) (plan.Plan, error) {
	if saved.Stale(st) {
		return plan.Plan{}, fmt.Errorf("apply: the plan in %s is stale: the broker's topology or ownership record changed since it was made (%s); run plan again",
			path, saved.CreatedAt.Format(time.RFC3339))
	}
	p := saved.Plan
	if err := plan.Recount(a.e.ctx, a.client, &p); err != nil {
		return plan.Plan{}, fmt.Errorf("apply: %w", err)
	}
	return p, nil
}

// run applies p, made from st, showing progress, and says what was done;
// diags are the plan's diagnostics, which apply refuses by.
func (a *applying) run(p plan.Plan, st *topology.State, specs map[string]string, concurrency int, allowDestroy bool, diags []plan.Diagnostic) error {
	progress := newProgress(a.e.stderr)
	defer progress.stop()
	res, err := apply.Apply(a.e.ctx, a.sess, p, apply.Options{
		Concurrency:  concurrency,
		AllowDestroy: allowDestroy,
		Diagnostics:  diags,
		Records:      plan.OwnRecords(st, specs),
		Progress:     progress.update,
		IsNotEmpty:   func(err error) bool { return errors.Is(err, broker.ErrNotEmpty) },
		VhostCreated: a.vhostCreated,
	})
	progress.stop()
	if err != nil {
		fmt.Fprintf(a.e.stderr, "Apply stopped after %s: %s; %s\n", res.Elapsed.Round(time.Millisecond), res.String(), notDone(res, err))
		return err
	}
	if !p.HasChanges() {
		return nil
	}
	fmt.Fprintf(a.e.stdout, "\nApply complete: %s in %s.\n", res.String(), res.Elapsed.Round(time.Millisecond))
	return nil
}

// notDone says what an apply that stopped did not do, and whether running
// it again can finish: not when the broker refused a change, which will
// refuse again until the spec or the broker changes.
func notDone(res apply.Result, err error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d changes not made", len(res.NotDone))
	for i, c := range res.NotDone {
		if i == 3 {
			fmt.Fprintf(&b, ", and %d more", len(res.NotDone)-3)
			break
		}
		fmt.Fprintf(&b, "%s %s %s", map[bool]string{true: ":", false: ","}[i == 0], c.Action, c.Address)
	}
	b.WriteString(". The ownership record lists what exists. ")
	switch {
	case errors.Is(err, broker.ErrUnreachable), errors.Is(err, broker.ErrTimeout), errors.Is(err, broker.ErrServer):
		b.WriteString("The connection failed: planning and applying again finishes the job once the broker is reachable.")
	case errors.Is(err, broker.ErrNodeDown):
		b.WriteString("A cluster node is down (above): planning and applying again finishes the job once it is back.")
	case errors.Is(err, broker.ErrNotEmpty), errors.Is(err, broker.ErrLocked):
		b.WriteString("Plan again once the cause above is gone.")
	default:
		b.WriteString("The broker refused a change: applying again will fail the same way until the spec or the broker changes.")
	}
	return b.String()
}

// vhostCreated locks a vhost this apply has just created. The plan was
// made when the vhost did not exist: if another apply created and filled
// it meanwhile, this plan is stale.
func (a *applying) vhostCreated(ctx context.Context, vhost string) error {
	if a.locked[vhost] {
		return nil
	}
	if err := a.sess.Lock(ctx, vhost); err != nil {
		return err
	}
	t, err := a.client.ReadVhost(ctx, vhost)
	if err != nil {
		return err
	}
	if n := len(t.Exchanges) + len(t.Queues) + len(t.Policies); n > 0 {
		return fmt.Errorf("vhost %q appeared with %d objects since the plan was made; plan again", vhost, n)
	}
	return nil
}

// confirm asks for "yes" on a terminal and refuses to guess otherwise.
func confirm(e *env) error {
	if !stdinIsTerminal(e.stdin) {
		return errors.New("apply: stdin is not a terminal, so it cannot ask for confirmation; pass --auto-approve to apply without asking")
	}
	fmt.Fprint(e.stderr, "\nDo you want to apply these changes? Only 'yes' will be accepted.\n  Enter a value: ")
	line, err := bufio.NewReader(e.stdin).ReadString('\n')
	if err != nil && line == "" {
		return errors.New("apply: no answer; nothing was changed")
	}
	if strings.TrimSpace(line) != "yes" {
		return &ExitError{Code: 1, Err: errors.New("apply cancelled; nothing was changed")}
	}
	return nil
}

// progress prints "applied N/M changes" to stderr about once a second
// while an apply runs; short applies print nothing.
type progress struct {
	w     io.Writer
	mu    sync.Mutex
	done  int
	total int
	*ticker
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w}
	p.ticker = everySecond(func() {
		p.mu.Lock()
		if p.total > 0 && p.done < p.total {
			fmt.Fprintf(p.w, "applied %d/%d changes\n", p.done, p.total)
		}
		p.mu.Unlock()
	})
	return p
}

func (p *progress) update(done, total int) {
	p.mu.Lock()
	if done > p.done {
		p.done = done
	}
	p.total = total
	p.mu.Unlock()
}

// ticker calls a function about once a second, for progress reports,
// until stopped.
type ticker struct {
	quit chan struct{}
	once sync.Once
}

func everySecond(tick func()) *ticker {
	t := &ticker{quit: make(chan struct{})}
	go func() {
		tt := time.NewTicker(time.Second)
		defer tt.Stop()
		for {
			select {
			case <-t.quit:
				return
			case <-tt.C:
				tick()
			}
		}
	}()
	return t
}

// stop ends the ticks; it may be called more than once.
func (t *ticker) stop() { t.once.Do(func() { close(t.quit) }) }

// scrub removes secrets from an error's text, as a last line of defence:
// messages are built without credentials, but errors of other libraries
// may quote a URL.
func scrub(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := msg
	for _, s := range secrets {
		if s != "" {
			clean = strings.ReplaceAll(clean, s, "xxxxx")
		}
	}
	if clean == msg {
		return err
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return &ExitError{Code: ee.Code, Err: errors.New(clean)}
	}
	return errors.New(clean)
}
