package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/ops"
	"github.com/rmqtopo/rmqtopo/render"
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
	Vhost  string    `help:"Vhost of the queues." default:"/"`
	Window int       `help:"Messages held at once (the consumer prefetch); bounds memory." default:"1000"`
	Format string    `short:"f" help:"Output format: text or json." enum:"text,json" default:"text"`
	Conn   connFlags `embed:""`
}

// broker is the Broker the command works on, scrubbing the secrets of
// the session it opens from its error.
func (q *opsQueueFlags) broker(e *env) (ops.Broker, error) {
	client, err := q.Conn.client(e)
	if err != nil {
		return nil, err
	}
	return ops.Live(client, func(s *broker.Session) { e.hide(s.Secrets) }), nil
}

type dlqShowCmd struct {
	Queue string `arg:"" name:"QUEUE" help:"The queue to read, usually a DLQ."`
	Limit int    `short:"n" help:"Messages to show, from the head." default:"10"`
	opsQueueFlags
}

func (c *dlqShowCmd) Run(e *env) error {
	if c.Limit < 1 {
		return fmt.Errorf("--limit must be at least 1, got %d", c.Limit)
	}
	b, err := c.broker(e)
	if err != nil {
		return err
	}
	shown, err := ops.ShowQueue(e.ctx, b, ops.ShowRequest{Vhost: c.Vhost, Queue: c.Queue, Limit: c.Limit, Window: c.Window, Log: e.stderr})
	if err != nil {
		return vhostHint(err, c.Vhost)
	}
	if c.Format == "json" {
		return render.DLQShowJSON(e.stdout, shown)
	}
	return render.DLQShowText(e.stdout, shown)
}

// vhostHint completes a missing queue of the default vhost with the flag
// that names another: the queue is most often in a vhost of its own.
func vhostHint(err error, vhost string) error {
	var nf *ops.QueueNotFoundError
	if errors.As(err, &nf) && nf.Vhost == "/" && vhost == "/" {
		return fmt.Errorf("%w; give the queue's vhost with --vhost", err)
	}
	return err
}

type dlqReplayCmd struct {
	Queue      string   `arg:"" name:"QUEUE" help:"The DLQ to replay from."`
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
	b, err := c.broker(e)
	if err != nil {
		return err
	}
	results, err := ops.ReplayQueue(e.ctx, b, ops.ReplayRequest{Vhost: c.Vhost, Log: e.stderr, ReplayOptions: ops.ReplayOptions{
		Queue: c.Queue, To: c.To, Limit: c.Limit, Headers: headers, RoutingKey: c.RoutingKey, Window: c.Window, DryRun: c.DryRun}})
	return c.finish(e, results, vhostHint(err, c.Vhost))
}

type dlqSweepCmd struct {
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

// declared are the queues of the vhost that the --spec files declare:
// the targets a sweep may use without --unmanaged-target.
func (c *dlqSweepCmd) declared(e *env) (map[string]bool, error) {
	declared := map[string]bool{}
	if len(c.Specs) == 0 {
		return declared, nil
	}
	files, err := loadSpecs(e, c.Specs)
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
	write := render.DLQResultsText
	if q.Format == "json" {
		write = render.DLQResultsJSON
	}
	werr := write(e.stdout, results)
	if err := ops.MovesError(results, err); err != nil {
		return err
	}
	return werr
}
