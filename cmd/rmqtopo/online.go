package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rmqtopo/rmqtopo/apply"
	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/render"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

var _ apply.Target = (*broker.Session)(nil)

type planCmd struct {
	Files            []string  `arg:"" name:"FILE" help:"Spec files (one vhost each)."`
	Format           string    `short:"f" help:"Output format: text, json or markdown." enum:"text,json,markdown" default:"text"`
	DetailedExitcode bool      `name:"detailed-exitcode" help:"Exit 0 when there are no changes, 2 when there are, 1 on error."`
	Out              string    `name:"out" placeholder:"FILE" help:"Save the plan to FILE, for 'rmqtopo apply FILE'."`
	Against          string    `name:"against" placeholder:"FILE|empty" help:"Plan against a definitions export (rabbitmqctl export_definitions, GET /api/definitions) or an empty broker instead of a live one; needs no credentials."`
	Prune            bool      `help:"Delete objects rmqtopo created that left the spec."`
	AllowDestroy     bool      `name:"allow-destroy" help:"Accept changes that destroy messages (queue replaces and deletes)."`
	Conn             connFlags `embed:""`
}

func (c *planCmd) Run(e *env) (err error) {
	files, err := loadSpecs(e, c.Files)
	if err != nil {
		return err
	}
	desired := spec.Expand(files...)
	opts := broker.PlanOptions{Prune: c.Prune}
	var p plan.Plan
	var st *broker.State
	var client *broker.Client
	if c.Against != "" {
		if c.Out != "" {
			return errors.New("plan: --out needs a live broker, not --against: a saved plan is checked against the broker it was made from")
		}
		st, err = againstState(c.Against, broker.Vhosts(desired))
		if err != nil {
			return err
		}
		p = st.Diff(desired, opts)
	} else {
		client, err = c.Conn.client(e)
		if err != nil {
			return err
		}
		defer func() { err = scrub(err, client.Secrets()) }()
		p, st, err = broker.Plan(e.ctx, client, desired, opts)
		if err != nil {
			return fmt.Errorf("plan: %w", err)
		}
	}
	diags := plan.Check(p, plan.CheckOptions{AllowDestroy: c.AllowDestroy})
	switch c.Format {
	case "json":
		err = render.PlanJSON(e.stdout, p, diags)
	case "markdown":
		err = render.PlanMarkdown(e.stdout, p, diags)
	default:
		err = render.PlanText(e.stdout, p, diags, e.color)
	}
	if err != nil {
		return err
	}
	if c.Out != "" {
		sp := newSavedPlan(client.URL(), st, c.Prune, p, diags)
		if err := sp.write(c.Out); err != nil {
			return fmt.Errorf("plan: %w", err)
		}
		fmt.Fprintf(e.stderr, "Saved the plan to %s; apply it with: rmqtopo apply %s\n", c.Out, c.Out)
	}
	if b := plan.Blocking(diags); len(b) > 0 {
		return blockingError("plan", b)
	}
	if c.DetailedExitcode && p.HasChanges() {
		return &ExitError{Code: 2}
	}
	return nil
}

func blockingError(cmd string, b []plan.Diagnostic) error {
	codes := map[string]bool{}
	var list []string
	for _, d := range b {
		if !codes[d.Code] {
			codes[d.Code] = true
			list = append(list, d.Code)
		}
	}
	noun := "change puts"
	if len(b) > 1 {
		noun = "changes put"
	}
	return fmt.Errorf("%s: %d %s messages at risk (%s); apply refuses without --allow-destroy",
		cmd, len(b), noun, strings.Join(list, ", "))
}

type applyCmd struct {
	Files        []string  `arg:"" name:"FILE" help:"Spec files (one vhost each), or one plan saved with 'rmqtopo plan --out'."`
	AutoApprove  bool      `name:"auto-approve" help:"Apply without asking for confirmation."`
	Prune        bool      `help:"Delete objects rmqtopo created that left the spec."`
	AllowDestroy bool      `name:"allow-destroy" help:"Accept changes that destroy messages: queue replaces and deletes run without the if-empty guard."`
	Concurrency  int       `help:"Changes in flight at once within each phase." default:"32"`
	Conn         connFlags `embed:""`
}

// stdinIsTerminal reports whether apply may ask for confirmation; tests
// replace it.
var stdinIsTerminal = func(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func (c *applyCmd) Run(e *env) (err error) {
	var (
		desired topology.Topology
		saved   *savedPlan
	)
	if len(c.Files) == 1 {
		saved, err = readSavedPlan(c.Files[0])
		if err != nil {
			return err
		}
	}
	if saved != nil && c.Prune {
		return errors.New("apply: --prune does not apply to a saved plan: it was decided when the plan was made (plan --prune --out FILE)")
	}
	var vhosts []string
	if saved != nil {
		vhosts = saved.Vhosts
	} else {
		files, err := loadSpecs(e, c.Files)
		if err != nil {
			return err
		}
		desired = spec.Expand(files...)
		vhosts = broker.Vhosts(desired)
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

	// Lock before reading, so that the state planned from is the state
	// applied to. A vhost that does not exist yet is locked as soon as
	// this apply has created it (see VhostCreated below).
	locked := map[string]bool{}
	lockExisting := func(vs []string) error {
		for _, v := range vs {
			if locked[v] {
				continue
			}
			err := sess.Lock(e.ctx, v)
			if errors.Is(err, broker.ErrVhostNotFound) {
				continue
			}
			if err != nil {
				return fmt.Errorf("apply: %w", err)
			}
			locked[v] = true
		}
		return nil
	}
	if err := lockExisting(vhosts); err != nil {
		return err
	}
	var (
		p  plan.Plan
		st *broker.State
	)
	for attempt := 0; ; attempt++ {
		if saved != nil {
			st, err = client.Read(e.ctx, vhosts)
		} else {
			p, st, err = broker.Plan(e.ctx, client, desired, broker.PlanOptions{Prune: c.Prune})
		}
		if err != nil {
			return fmt.Errorf("apply: %w", err)
		}
		// A vhost created by someone else between the lock attempt and the
		// read: lock it and read again.
		var unlocked []string
		for _, v := range st.Topology.Vhosts {
			if !locked[v] {
				unlocked = append(unlocked, v)
			}
		}
		if len(unlocked) == 0 || attempt > 0 {
			break
		}
		if err := lockExisting(unlocked); err != nil {
			return err
		}
	}
	if saved != nil {
		if fp := st.Fingerprint(); fp != saved.Fingerprint {
			return fmt.Errorf("apply: the plan in %s is stale: the broker's topology or ownership record changed since it was made (%s); run plan again",
				c.Files[0], saved.CreatedAt.Format(time.RFC3339))
		}
		p = saved.Plan
		// Counts change all the time and are not part of the fingerprint:
		// the messages at stake are the ones there now.
		if err := broker.RefreshCounts(e.ctx, client, &p); err != nil {
			return fmt.Errorf("apply: %w", err)
		}
	}

	diags := plan.Check(p, plan.CheckOptions{AllowDestroy: c.AllowDestroy})
	if err := render.PlanText(e.stdout, p, diags, e.color); err != nil {
		return err
	}
	if !p.HasChanges() {
		return nil
	}
	if b := plan.Blocking(diags); len(b) > 0 {
		return blockingError("apply", b)
	}
	if !c.AutoApprove {
		if err := confirm(e); err != nil {
			return err
		}
	}

	progress := newProgress(e.stderr)
	defer progress.stop()
	res, err := apply.Apply(e.ctx, sess, p, apply.Options{
		Concurrency:  c.Concurrency,
		AllowDestroy: c.AllowDestroy,
		Owned:        st.Owned,
		Progress:     progress.update,
		IsNotEmpty:   func(err error) bool { return errors.Is(err, broker.ErrNotEmpty) },
		VhostCreated: func(ctx context.Context, vhost string) error {
			if locked[vhost] {
				return nil
			}
			if err := sess.Lock(ctx, vhost); err != nil {
				return err
			}
			// The plan was made when the vhost did not exist. If another
			// apply created and filled it meanwhile, this plan is stale.
			t, err := client.ReadVhost(ctx, vhost)
			if err != nil {
				return err
			}
			if n := len(t.Exchanges) + len(t.Queues) + len(t.Policies); n > 0 {
				return fmt.Errorf("vhost %q appeared with %d objects since the plan was made; plan again", vhost, n)
			}
			return nil
		},
	})
	progress.stop()
	if err != nil {
		fmt.Fprintf(e.stderr, "Apply stopped after %s: %s. Planning and applying again finishes the job.\n",
			res.Elapsed.Round(time.Millisecond), res.Summary())
		return err
	}
	fmt.Fprintf(e.stdout, "\nApply complete: %s in %s.\n", res.Summary(), res.Elapsed.Round(time.Millisecond))
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
