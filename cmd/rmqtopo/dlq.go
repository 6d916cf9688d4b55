package main

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/ops"
	"github.com/rmqtopo/rmqtopo/spec"
)

// dlqCmd's subcommands are listed in a group of their own, whose column
// width leaves the main list's as it was.
type dlqCmd struct {
	Show   dlqShowCmd   `cmd:"" group:"Dead letters:" help:"Show the head of a DLQ without consuming or reordering it."`
	Replay dlqReplayCmd `cmd:"" group:"Dead letters:" help:"Move DLQ messages back to their work queue for a fresh retry."`
	Sweep  dlqSweepCmd  `cmd:"" group:"Dead letters:" help:"Move messages that died too often out of the matching queues."`
}

// opsQueueFlags are the flags of the commands that work on queues.
type opsQueueFlags struct {
	Vhost  string    `help:"Vhost of the queues (default: /, or for the dlq commands the spec files')."`
	Window int       `help:"Messages held at once (the consumer prefetch); bounds memory." default:"1000"`
	Format string    `short:"f" help:"Output format: text or json." enum:"text,json" default:"text"`
	Conn   connFlags `embed:""`
}

// broker is the ops.Endpoint the command works on, scrubbing the secrets of
// the session it opens from its error.
func (q *opsQueueFlags) broker(e *env) (ops.Endpoint, error) {
	client, err := q.Conn.client(e)
	if err != nil {
		return nil, err
	}
	return ops.Live(client, func(s *broker.Session) { e.hide(s.Secrets) }), nil
}

type dlqShowCmd struct {
	queueArgs
	Limit int `short:"n" help:"Messages to show, from the head." default:"10"`
	opsQueueFlags
}

func (c *dlqShowCmd) Run(e *env) error {
	if c.Limit < 1 {
		return fmt.Errorf("--limit must be at least 1, got %d", c.Limit)
	}
	queue, vhost, defaulted, err := c.target(e, c.Vhost)
	if err != nil {
		return err
	}
	b, err := c.broker(e)
	if err != nil {
		return err
	}
	shown, err := ops.ShowQueue(e.ctx, b, ops.ShowRequest{Vhost: vhost, Queue: queue, Limit: c.Limit, Window: c.Window, Log: e.stderr})
	if err != nil {
		return vhostHint(err, defaulted)
	}
	if c.Format == "json" {
		return ops.ShowJSON(e.stdout, shown)
	}
	return ops.ShowText(e.stdout, shown)
}

// vhostHint completes a missing queue of the default vhost, which neither
// --vhost nor a spec file chose (defaulted), with the ways to name
// another: the queue is most often in a vhost of its own.
func vhostHint(err error, defaulted bool) error {
	var nf *ops.QueueNotFoundError
	if errors.As(err, &nf) && defaulted {
		return fmt.Errorf("%w; give the queue's vhost with --vhost, or its spec file", err)
	}
	return err
}

type dlqReplayCmd struct {
	queueArgs
	To         string   `help:"Work queue to replay to (default: QUEUE without its .dlq suffix)."`
	Limit      int      `short:"n" help:"Replay at most this many messages (0: every match)." default:"0"`
	Header     []string `name:"header" placeholder:"NAME=VALUE" help:"Replay only messages whose header NAME has VALUE; repeat to require several."`
	RoutingKey string   `name:"routing-key" help:"Replay only messages first published with this routing key."`
	DryRun     bool     `name:"dry-run" help:"Count the messages that would be replayed; move nothing."`
	opsQueueFlags
}

func (c *dlqReplayCmd) Run(e *env) error {
	headers := map[string]string{}
	for _, h := range c.Header {
		name, value, ok := strings.Cut(h, "=")
		if !ok || name == "" {
			return fmt.Errorf("--header %q: want NAME=VALUE", h)
		}
		headers[name] = value
	}
	if c.Limit < 0 {
		return fmt.Errorf("--limit must not be negative, got %d", c.Limit)
	}
	queue, vhost, defaulted, err := c.target(e, c.Vhost)
	if err != nil {
		return err
	}
	b, err := c.broker(e)
	if err != nil {
		return err
	}
	results, err := ops.ReplayQueue(e.ctx, b, ops.ReplayRequest{Vhost: vhost, Log: e.stderr, ReplayOptions: ops.ReplayOptions{
		Queue: queue, To: c.To, Limit: c.Limit, Headers: headers, RoutingKey: c.RoutingKey, Window: c.Window, DryRun: c.DryRun}})
	return c.finish(e, results, vhostHint(err, defaulted))
}

type dlqSweepCmd struct {
	Files     []string `arg:"" optional:"" name:"FILE" help:"Spec files: the vhost to sweep (one), and queues that may be targets, as --spec."`
	Pattern   string   `help:"Queues to sweep: a name where * matches any characters and ? one." env:"RMQTOPO_SWEEP_PATTERN"`
	MaxDeaths *int64   `name:"max-deaths" placeholder:"N" help:"Move messages dead-lettered more than N times: the x-death counts plus rmqtopo's own (a dead-letter reason or a retry past the schedule, and each replay)." env:"RMQTOPO_SWEEP_MAX_DEATHS"`
	To        string   `help:"Target queue; {name} is the source queue's name, e.g. {name}.parking-lot. It must be a queue of a --spec, or --unmanaged-target must allow it." env:"RMQTOPO_SWEEP_TO"`
	Config    string   `name:"config" placeholder:"FILE" help:"JSON or YAML file with pattern, max_deaths, to, vhost, window and unmanaged_target; flags and environment variables win." env:"RMQTOPO_SWEEP_CONFIG"`
	Specs     []string `name:"spec" placeholder:"FILE" help:"Spec files whose queues (parking lots included) may be targets; repeat for several."`
	Unmanaged bool     `name:"unmanaged-target" help:"Allow targets no --spec declares, declared (durable, classic) if missing; no plan or apply will know them."`
	DryRun    bool     `name:"dry-run" help:"Count the messages that would move; declare and move nothing."`
	opsQueueFlags

	configErr error // from BeforeResolve, reported by Run as a runtime error
}

// BeforeResolve loads --config as a kong resolver. Kong applies resolvers
// only to flags not given on the command line; this one also skips flags
// whose environment variable is set, so the order is flag, environment,
// file, default.
func (c *dlqSweepCmd) BeforeResolve(kctx *kong.Context) error {
	// Kong would present an error here as a usage error; the file's
	// problems are not the command line's.
	c.configErr = c.loadConfig(kctx)
	return nil
}

func (c *dlqSweepCmd) loadConfig(kctx *kong.Context) error {
	var path string
	for _, f := range kctx.Flags() {
		if f.Name == "config" {
			path, _ = kctx.FlagValue(f).(string)
		}
	}
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	values, err := ops.ReadSweepConfig(data)
	if err != nil {
		return fmt.Errorf("--config %s: %w", path, err)
	}
	kctx.AddResolver(kong.ResolverFunc(func(_ *kong.Context, _ *kong.Path, f *kong.Flag) (any, error) {
		for _, name := range f.Envs {
			if _, set := os.LookupEnv(name); set {
				return nil, nil
			}
		}
		if v, ok := values[f.Name]; ok {
			return v, nil
		}
		return nil, nil
	}))
	return nil
}

func (c *dlqSweepCmd) Run(e *env) error {
	switch {
	case c.configErr != nil:
		return c.configErr
	case c.Pattern == "":
		return errors.New("a pattern is required: --pattern, RMQTOPO_SWEEP_PATTERN or \"pattern\" in --config")
	case c.To == "":
		return errors.New("a target is required: --to, RMQTOPO_SWEEP_TO or \"to\" in --config")
	case c.MaxDeaths == nil:
		return errors.New("a death threshold is required: --max-deaths, RMQTOPO_SWEEP_MAX_DEATHS or \"max_deaths\" in --config")
	}
	if err := c.chooseVhost(e); err != nil {
		return err
	}
	b, err := c.broker(e)
	if err != nil {
		return err
	}
	results, err := ops.Sweep(e.ctx, b, ops.SweepRequest{
		Vhost: c.Vhost, SweepOptions: ops.SweepOptions{Pattern: c.Pattern, MaxDeaths: *c.MaxDeaths, To: c.To},
		Declared: func() (map[string]bool, error) { return c.declared(e) }, Unmanaged: c.Unmanaged, DryRun: c.DryRun, Window: c.Window, Log: e.stderr,
	})
	return c.finish(e, results, err)
}

// chooseVhost sets the vhost to sweep: --vhost, else the one of the spec
// files given as arguments, else "/". --spec files only name targets, as
// before the command took files: they choose no vhost.
func (c *dlqSweepCmd) chooseVhost(e *env) error {
	if len(c.Files) == 0 {
		c.Vhost = cmp.Or(c.Vhost, "/")
		return nil
	}
	if files, queues := splitSpecArgs(c.Files); len(queues) > 0 {
		return input(fmt.Errorf("%s: not spec files (*.yaml, *.yml); a sweep takes its queues from --pattern", quotedList(queues)))
	} else if len(files) == 0 {
		return nil
	}
	sq, err := loadSpecQueues(e, c.Files)
	if err != nil {
		return err
	}
	c.Vhost, err = sq.vhost(c.Vhost)
	return err
}

// declared are the queues of the vhost that the spec files (arguments and
// --spec) declare: the targets a sweep may use without --unmanaged-target.
func (c *dlqSweepCmd) declared(e *env) (map[string]bool, error) {
	declared := map[string]bool{}
	paths := append(slices.Clone(c.Files), c.Specs...)
	if len(paths) == 0 {
		return declared, nil
	}
	files, err := loadSpecs(e, paths)
	if err != nil {
		return nil, err
	}
	for _, q := range spec.Expand(files...).Queues {
		if q.Vhost == c.Vhost {
			declared[q.Name] = true
		}
	}
	return declared, nil
}

// finish prints the results of moves, if any began, and turns their error
// into the command's.
func (q *opsQueueFlags) finish(e *env, results []ops.Result, err error) error {
	if results == nil {
		return err
	}
	write := ops.ResultsText
	if q.Format == "json" {
		write = ops.ResultsJSON
	}
	werr := write(e.stdout, results)
	if err := ops.MovesError(results, err); err != nil {
		return err
	}
	return werr
}
