package main

import (
	"errors"
	"fmt"

	"github.com/rmqtopo/rmqtopo/cmd/rmqtopo/flagwords"
	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/internal/definitions"
	"github.com/rmqtopo/rmqtopo/internal/exitcode"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/plan/planjson"
	"github.com/rmqtopo/rmqtopo/render"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

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
		src, brokerURL = client, client.URL()
	}
	from := "broker"
	if c.Against != "" {
		from = "export"
	}
	var notes layoutNotes
	ch := choices(files, c.Prune, c.Migrate)
	ch.Expand = layouts(files, c.Version.RabbitMQVersion, from, &notes)
	p, st, err := plan.Make(e.ctx, src, desired, ch)
	if err != nil {
		if c.Against != "" {
			return fmt.Errorf("--against: %w", err)
		}
		return err
	}
	diags, err := review(e, &p, st, client, plan.ReviewOptions{
		Check:           plan.CheckOptions{AllowDestroy: c.AllowDestroy, Specs: specs, Kept: notes.kept, Routes: notes.routes},
		RabbitMQVersion: c.Version.RabbitMQVersion, From: from,
	})
	if err != nil {
		return err
	}
	if err := renderPlan(e, c.Format, p, diags); err != nil {
		return err
	}
	return c.finish(e, p, diags, func() *planjson.File { return planjson.New(brokerURL, st, specs, c.Prune, p, diags) })
}

// finish saves the plan (--out, as saved makes it) unless the broker
// would refuse it, which no flag of apply accepts, and gives the
// command's exit.
func (c *planCmd) finish(e *env, p plan.Plan, diags []plan.Diagnostic, saved func() *planjson.File) error {
	blocking := plan.Blocking(diags)
	if c.Out != "" && len(plan.Refusals(blocking)) == 0 {
		if err := saved().Write(c.Out); err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "Saved the plan to %s; apply it with: rmqtopo apply %s\n", c.Out, c.Out)
	}
	if len(blocking) > 0 {
		err := blockingError(blocking)
		if c.DetailedExitcode {
			// An ExitError says all it means: it names the command itself.
			return &ExitError{Code: exitcode.Refused, Err: fmt.Errorf("plan: %w", err)}
		}
		return err
	}
	if c.DetailedExitcode && p.HasChanges() {
		return &ExitError{Code: exitcode.Changes}
	}
	return nil
}

// renderPlan writes p in the chosen format: text, json or markdown, in
// the CLI's words (flagwords).
func renderPlan(e *env, format string, p plan.Plan, diags []plan.Diagnostic) error {
	switch format {
	case "json":
		return render.PlanJSON(e.stdout, p, diags)
	case "markdown":
		return render.PlanMarkdown(e.stdout, p, diags, render.MarkdownOptions{SeeAll: flagwords.MarkdownSeeAll, VersionFlag: flagwords.RabbitMQVersion})
	default:
		return render.PlanText(e.stdout, p, diags, render.TextOptions{Color: e.color, VersionFlag: flagwords.RabbitMQVersion})
	}
}

// layoutNotes are what resolving the spec's layouts tells the plan's
// checks: the live queues that keep their layout (RT107, RT109) and how
// each queue's retries travel (RT110, RT111).
type layoutNotes struct {
	kept   []plan.LayoutKept
	routes []plan.QueueRoute
}

// layouts resolves files for the state a plan reads (spec.Resolve): the
// judged version (override, else the state's) and the live queues choose
// the layout auto gives each queue; notes receives what the plan's checks
// say of them.
func layouts(files []*spec.File, override, from string, notes *layoutNotes) func(*topology.State) topology.Topology {
	return func(st *topology.State) topology.Topology {
		// A bad override is reported by the review that follows.
		j, _ := plan.JudgeVersion(override, st, from)
		v, _ := topology.ParseVersion(j.Version)
		notes.kept = notes.kept[:0]
		for _, k := range spec.Resolve(files, spec.Target{RabbitMQ: v, Live: &st.Topology}) {
			notes.kept = append(notes.kept, plan.LayoutKept{Address: queueAddress(k.Vhost, k.Queue), Move: k.String(), Conflict: k.Conflict})
		}
		notes.routes = queueRoutes(files)
		// What rmqtopo declares depends on the release (spec/release.go).
		return spec.ExpandFor(v, files...)
	}
}

// queueRoutes says how each retrying queue of files, as resolved, has its
// retries travel; a raw queue or a preset's, which the retry helper does
// not serve, has no line.
func queueRoutes(files []*spec.File) []plan.QueueRoute {
	var routes []plan.QueueRoute
	for _, f := range files {
		s := &f.Spec
		for _, q := range s.Queues {
			if t := s.TravelOf(q); !q.Raw && t.RetryAfter != spec.RetryAfterNotApplicable {
				routes = append(routes, plan.QueueRoute{Address: queueAddress(s.Vhost, q.Name), Travel: t.String(), Others: t.Others})
			}
		}
	}
	return routes
}

func queueAddress(vhost, name string) topology.Address {
	return topology.Address{Kind: topology.KindQueue, Vhost: vhost, Name: name}
}

// choices are the plan choices of the flags and the spec: --prune,
// --migrate for every queue, migrate: true per queue.
func choices(files []*spec.File, prune, migrateAll bool) plan.Choices {
	return plan.Choices{Specs: spec.Names(files), Prune: prune, Migrate: plan.Migration{All: migrateAll, Queues: spec.Migrations(files...)},
		Retire: spec.Retired(files...)}
}

// review runs plan.Review with client as the live broker (nil for none)
// and prints its warning.
func review(e *env, p *plan.Plan, st *topology.State, client *broker.Client, o plan.ReviewOptions) ([]plan.Diagnostic, error) {
	if client != nil {
		o.Broker = client
	}
	diags, warning, err := plan.Review(e.ctx, p, st, o)
	if warning != nil {
		// The only warning: the broker would not say its version.
		fmt.Fprintf(e.stderr, "warning: %v (give %s)\n", warning, flagwords.RabbitMQVersion)
	}
	return flagwords.Diagnostics(diags), err
}
