package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/alecthomas/kong"
	amqp "github.com/rabbitmq/amqp091-go"
	"go.yaml.in/yaml/v3"

	"github.com/rmqtopo/rmqtopo/contract"
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
	Vhost  string    `help:"Vhost of the queues." default:"/"`
	Window int       `help:"Messages held at once (the consumer prefetch); bounds memory." default:"1000"`
	Format string    `short:"f" help:"Output format: text or json." enum:"text,json" default:"text"`
	Conn   connFlags `embed:""`
}

// opsSession is what one operations command holds open.
type opsSession struct {
	conn  *opsConn
	amqp  *amqp.Connection
	major int // the broker's major version
}

func (q *opsQueueFlags) open(e *env, purpose string) (*opsSession, error) {
	if q.Window < 1 || q.Window > 65535 {
		return nil, fmt.Errorf("--window must be between 1 and 65535, got %d", q.Window)
	}
	conn, err := q.Conn.ops(e)
	if err != nil {
		return nil, err
	}
	s := &opsSession{conn: conn}
	v, err := conn.client.Version(e.ctx)
	if err != nil {
		return nil, err
	}
	s.major = v.Major
	if s.amqp, err = conn.dial(e.ctx, q.Vhost, purpose); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *opsSession) close() { _ = s.amqp.Close() }

// queue reads a queue that messages will be left in, and refuses one whose
// delivery limit would lose them.
func (s *opsSession) queue(ctx context.Context, vhost, name string) (ops.Queue, error) {
	info, err := s.conn.client.GetQueue(ctx, vhost, name)
	if isOpsNotFound(err) {
		return ops.Queue{}, fmt.Errorf("queue %q not found in vhost %q", name, vhost)
	}
	if err != nil {
		return ops.Queue{}, err
	}
	q := opsQueue(info)
	return q, ops.CheckLeaveSafe(q, s.major)
}

type dlqShowCmd struct {
	Queue string `arg:"" name:"QUEUE" help:"The queue to read, usually a DLQ."`
	Limit int    `short:"n" help:"Messages to show, from the head." default:"10"`
	opsQueueFlags
}

func (c *dlqShowCmd) Run(e *env) (err error) {
	if c.Limit < 1 {
		return fmt.Errorf("dlq show: --limit must be at least 1, got %d", c.Limit)
	}
	s, err := c.open(e, "dlq show")
	if err != nil {
		return fmt.Errorf("dlq show: %w", err)
	}
	defer s.close()
	q, err := s.queue(e.ctx, c.Vhost, c.Queue)
	if err != nil {
		return fmt.Errorf("dlq show: %w", err)
	}
	if !ops.InPlaceRequeue(q.Type) && q.Ready > int64(c.Limit) {
		fmt.Fprintf(e.stderr, "reading all %d messages of %s queue %q to leave them in order\n", q.Ready, q.Type, c.Queue)
	}
	if note := ops.LookingIsDelivery(q); note != "" {
		fmt.Fprintln(e.stderr, note)
	}
	msgs, res, err := ops.Peek(e.ctx, s.amqp, c.Queue, q.Type, c.Limit, c.Window)
	warnPass(e, res)
	if err != nil {
		return fmt.Errorf("dlq show: %w", err)
	}
	shown := ops.Shown{Vhost: c.Vhost, Queue: c.Queue, Type: q.Type, ReadIsDelivery: ops.LookingIsDelivery(q) != "", Depth: res.Depth, Messages: msgs}
	if c.Format == "json" {
		return shown.WriteJSON(e.stdout)
	}
	return shown.WriteText(e.stdout)
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

func (c *dlqReplayCmd) Run(e *env) (err error) {
	headers := map[string]string{}
	for _, h := range c.Header {
		name, value, ok := strings.Cut(h, "=")
		if !ok || name == "" {
			return fmt.Errorf("dlq replay: --header %q: want NAME=VALUE", h)
		}
		headers[name] = value
	}
	if c.Limit < 0 {
		return fmt.Errorf("dlq replay: --limit must not be negative, got %d", c.Limit)
	}
	target, err := ops.ReplayTarget(c.Queue, c.To)
	if err != nil {
		return fmt.Errorf("dlq replay: %w", err)
	}
	s, err := c.open(e, "dlq replay")
	if err != nil {
		return fmt.Errorf("dlq replay: %w", err)
	}
	defer s.close()
	q, err := s.queue(e.ctx, c.Vhost, c.Queue)
	if err != nil {
		return fmt.Errorf("dlq replay: %w", err)
	}
	if _, err := s.conn.client.GetQueue(e.ctx, c.Vhost, target); isOpsNotFound(err) {
		return fmt.Errorf("dlq replay: work queue %q not found in vhost %q; give the queue to replay to with --to", target, c.Vhost)
	} else if err != nil {
		return fmt.Errorf("dlq replay: %w", err)
	}
	p := newPassProgress(e.stderr)
	verb := "replaying"
	if c.DryRun {
		verb = "dry run: nothing moves; counting what would replay"
	}
	fmt.Fprintf(e.stderr, "%s from %s to %s\n", verb, c.Queue, target)
	if note := ops.LookingIsDelivery(q); note != "" && c.DryRun {
		fmt.Fprintln(e.stderr, note)
	}
	res, err := ops.Replay(e.ctx, s.amqp, ops.ReplayOptions{
		Queue: c.Queue, To: target, QueueType: q.Type, Limit: c.Limit, Headers: headers,
		RoutingKey: c.RoutingKey, Window: c.Window, Progress: p.update, DryRun: c.DryRun,
	})
	p.stop()
	if len(res.ResetHeaders) > 0 {
		fmt.Fprintf(e.stderr, "replay dropped %s from the messages it moved (it resets %s, %s and the broker's dead-lettering headers) and kept every other header\n",
			strings.Join(res.ResetHeaders, ", "), contract.HeaderAttempt, contract.HeaderDeadLetterReason)
	}
	return finishMoves(e, c.Format, "dlq replay", []ops.Result{res}, err)
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

// sweepConfigKeys are the flags a --config file may set.
var sweepConfigKeys = []string{"pattern", "max-deaths", "to", "vhost", "window", "unmanaged-target"}

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
		return fmt.Errorf("dlq sweep: --config: %w", err)
	}
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("dlq sweep: --config %s: %v", path, broker.OneLine(err.Error()))
	}
	values := map[string]any{}
	for k, v := range raw {
		name := strings.ReplaceAll(k, "_", "-")
		known := false
		for _, key := range sweepConfigKeys {
			known = known || key == name
		}
		if !known {
			return fmt.Errorf("dlq sweep: --config %s: unknown key %q (known: %s)", path, k, strings.Join(sweepConfigKeys, ", "))
		}
		switch v.(type) {
		case string, int, int64, float64, bool:
		default:
			return fmt.Errorf("dlq sweep: --config %s: %q must be a string, a number or a boolean", path, k)
		}
		values[name] = fmt.Sprint(v)
	}
	kctx.AddResolver(kong.ResolverFunc(func(_ *kong.Context, _ *kong.Path, f *kong.Flag) (any, error) {
		for _, name := range f.Envs {
			if _, set := os.LookupEnv(name); set {
				return nil, nil
			}
		}
		return values[f.Name], nil
	}))
	return nil
}

func (c *dlqSweepCmd) Run(e *env) (err error) {
	switch {
	case c.configErr != nil:
		return c.configErr
	case c.Pattern == "":
		return errors.New("dlq sweep: a pattern is required: --pattern, RMQTOPO_SWEEP_PATTERN or \"pattern\" in --config")
	case c.To == "":
		return errors.New("dlq sweep: a target is required: --to, RMQTOPO_SWEEP_TO or \"to\" in --config")
	case c.MaxDeaths == nil:
		return errors.New("dlq sweep: a death threshold is required: --max-deaths, RMQTOPO_SWEEP_MAX_DEATHS or \"max_deaths\" in --config")
	}
	s, err := c.open(e, "dlq sweep")
	if err != nil {
		return fmt.Errorf("dlq sweep: %w", err)
	}
	defer s.close()
	infos, err := s.conn.client.ListQueues(e.ctx, c.Vhost)
	if isOpsNotFound(err) {
		return fmt.Errorf("dlq sweep: vhost %q not found", c.Vhost)
	}
	if err != nil {
		return fmt.Errorf("dlq sweep: %w", err)
	}
	queues := make([]ops.Queue, len(infos))
	for i, q := range infos {
		queues[i] = opsQueue(q)
	}
	sources, err := ops.PlanSweep(queues, ops.SweepOptions{Pattern: c.Pattern, MaxDeaths: *c.MaxDeaths, To: c.To})
	if err != nil {
		return fmt.Errorf("dlq sweep: vhost %q: %w", c.Vhost, err)
	}
	for _, src := range sources {
		if err := ops.CheckLeaveSafe(src.Queue, s.major); err != nil {
			return fmt.Errorf("dlq sweep: %w", err)
		}
	}
	declared, err := c.declared(e)
	if err != nil {
		return err
	}
	if err := ops.CheckSweepTargets(sources, queues, declared, c.Unmanaged, c.DryRun); err != nil {
		return fmt.Errorf("dlq sweep: %w", err)
	}
	var results []ops.Result
	var errs []error
	for _, src := range sources {
		if e.ctx.Err() != nil {
			break
		}
		verb := "sweeping"
		if c.DryRun {
			verb = "dry run: nothing moves; counting what would sweep"
		}
		fmt.Fprintf(e.stderr, "%s %s into %s\n", verb, src.Queue.Name, src.Target)
		p := newPassProgress(e.stderr)
		res, err := ops.SweepQueue(e.ctx, s.amqp, src, ops.SweepRun{MaxDeaths: *c.MaxDeaths, Window: c.Window,
			Progress: p.update, CreateTarget: c.Unmanaged, DryRun: c.DryRun})
		p.stop()
		results = append(results, res)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", src.Queue.Name, err))
			if s.amqp.IsClosed() {
				break
			}
		}
	}
	if !c.DryRun {
		fmt.Fprintln(e.stderr, "sweep keeps every header as it was")
	}
	return finishMoves(e, c.Format, "dlq sweep", results, errors.Join(errs...))
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

// finishMoves prints the summary of moves to stdout, their warnings to
// stderr, and turns their error into the command's.
func finishMoves(e *env, format, cmd string, results []ops.Result, err error) error {
	for _, r := range results {
		warnPass(e, r)
	}
	werr := ops.WriteResults(e.stdout, format == "json", results)
	if err != nil {
		return fmt.Errorf("%s: %w", cmd, opsOneLineErr(err))
	}
	if failed := ops.Sum(results).Failed; failed > 0 {
		noun := "messages"
		if failed == 1 {
			noun = "message"
		}
		return fmt.Errorf("%s: %d %s could not be moved and stayed where they were", cmd, failed, noun)
	}
	return werr
}

// opsOneLineErr joins the lines of several errors, so that the command still
// fails with one "rmqtopo: ..." line.
func opsOneLineErr(err error) error {
	return errors.New(strings.ReplaceAll(err.Error(), "\n", "; "))
}

func warnPass(e *env, r ops.Result) {
	for _, w := range r.Warnings {
		fmt.Fprintf(e.stderr, "warning: %s: %s\n", r.Queue, w)
	}
}

// passProgress prints a pass's progress to stderr about once a second;
// passes shorter than a second print nothing.
type passProgress struct {
	w     io.Writer
	mu    sync.Mutex
	last  ops.Result
	start time.Time
	*ticker
}

func newPassProgress(w io.Writer) *passProgress {
	p := &passProgress{w: w, start: time.Now()}
	p.ticker = everySecond(func() {
		p.mu.Lock()
		if p.last.Queue != "" {
			fmt.Fprintln(p.w, ops.FormatProgress(p.last, time.Since(p.start)))
		}
		p.mu.Unlock()
	})
	return p
}

func (p *passProgress) update(r ops.Result) {
	p.mu.Lock()
	p.last = r
	p.mu.Unlock()
}
