package ops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/internal/english"
	"github.com/rmqtopo/rmqtopo/internal/progress"
)

// The dead-letter commands, each one call: connect, check the queues,
// run the passes. Log (stderr) gets their notes, the passes' progress
// about once a second and their warnings; what they return is plain data
// (Shown, Result), which render draws for stdout.

// session is what one command holds open.
type session struct {
	b     Broker
	conn  *amqp.Connection
	major int // the broker's major version
}

func open(ctx context.Context, b Broker, vhost string, window int, purpose string) (*session, error) {
	if window < 1 || window > 65535 {
		return nil, &WindowError{Window: window}
	}
	s := &session{b: b}
	var err error
	if s.major, err = b.Major(ctx); err != nil {
		return nil, err
	}
	if s.conn, err = b.Dial(ctx, vhost, purpose); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *session) close() { _ = broker.CloseConn(s.conn) }

// leaving reads a queue that messages will be left in, and refuses one
// whose delivery limit would lose them.
func (s *session) leaving(ctx context.Context, vhost, name string) (Queue, error) {
	q, err := s.b.Queue(ctx, vhost, name)
	if errors.Is(err, ErrNotFound) {
		return Queue{}, &QueueNotFoundError{Queue: name, Vhost: vhost}
	}
	if err != nil {
		return Queue{}, err
	}
	return q, CheckLeaveSafe(q, s.major)
}

// ShowRequest says which queue ShowQueue reads.
type ShowRequest struct {
	Vhost, Queue string
	// Limit is how many messages to show, from the head; Window the
	// messages held at once (the consumer prefetch).
	Limit, Window int
	Log           io.Writer
}

// ShowQueue reads the head of a queue without consuming or reordering it
// (see Peek).
func ShowQueue(ctx context.Context, b Broker, r ShowRequest) (Shown, error) {
	s, err := open(ctx, b, r.Vhost, r.Window, "dlq show")
	if err != nil {
		return Shown{}, err
	}
	defer s.close()
	q, err := s.leaving(ctx, r.Vhost, r.Queue)
	if err != nil {
		return Shown{}, err
	}
	if !InPlaceRequeue(q.Type) && q.Ready > int64(r.Limit) {
		fmt.Fprintf(r.Log, "reading all %d messages of %s queue %q to leave them in order\n", q.Ready, q.Type, r.Queue)
	}
	note := LookingIsDelivery(q)
	if note != "" {
		fmt.Fprintln(r.Log, note)
	}
	msgs, res, err := Peek(ctx, s.conn, r.Queue, q.Type, r.Limit, r.Window)
	warn(r.Log, res)
	if err != nil {
		return Shown{}, err
	}
	return Shown{Vhost: r.Vhost, Queue: r.Queue, Type: q.Type, ReadIsDelivery: note != "", Depth: res.Depth, Messages: msgs}, nil
}

// ReplayRequest says what ReplayQueue replays; Replay fills in the
// options' QueueType and Progress.
type ReplayRequest struct {
	Vhost string
	ReplayOptions
	Log io.Writer
}

// ReplayQueue moves a DLQ's matching messages back to their work queue,
// which must exist (see Replay). Like Sweep, it returns no results when
// it failed before its pass began, else the pass's.
func ReplayQueue(ctx context.Context, b Broker, r ReplayRequest) ([]Result, error) {
	target, err := ReplayTarget(r.Queue, r.To)
	if err != nil {
		return nil, err
	}
	s, err := open(ctx, b, r.Vhost, r.Window, "dlq replay")
	if err != nil {
		return nil, err
	}
	defer s.close()
	q, err := s.leaving(ctx, r.Vhost, r.Queue)
	if err != nil {
		return nil, err
	}
	if _, err := b.Queue(ctx, r.Vhost, target); errors.Is(err, ErrNotFound) {
		return nil, &QueueNotFoundError{Queue: target, Vhost: r.Vhost, Work: true}
	} else if err != nil {
		return nil, err
	}
	verb := "replaying"
	if r.DryRun {
		verb = "dry run: nothing moves; counting what would replay"
	}
	fmt.Fprintf(r.Log, "%s from %s to %s\n", verb, r.Queue, target)
	if note := LookingIsDelivery(q); note != "" && r.DryRun {
		fmt.Fprintln(r.Log, note)
	}
	p := passProgress(r.Log)
	o := r.ReplayOptions
	o.To, o.QueueType, o.Progress = target, q.Type, p.Update
	res, err := Replay(ctx, s.conn, o)
	p.Stop()
	if len(res.ResetHeaders) > 0 {
		fmt.Fprintf(r.Log, "replay dropped %s from the messages it moved (it resets %s, %s and the broker's dead-lettering headers) and kept every other header\n",
			strings.Join(res.ResetHeaders, ", "), contract.HeaderAttempt, contract.HeaderDeadLetterReason)
	}
	warn(r.Log, res)
	return []Result{res}, err
}

// SweepRequest says what Sweep sweeps.
type SweepRequest struct {
	Vhost string
	SweepOptions
	// Declared gives the queues of the vhost that the operator's specs
	// declare (see CheckSweepTargets), once the sources are known.
	Declared func() (map[string]bool, error)
	// Unmanaged allows targets Declared lacks, declared if missing.
	Unmanaged, DryRun bool
	Window            int
	Log               io.Writer
}

// Sweep moves the messages that died too often out of the queues that
// match the pattern, source by source (see SweepQueue). It returns no
// results (nil) when it failed before the first pass began; else the
// results of the sources it swept, with the errors of those that failed.
func Sweep(ctx context.Context, b Broker, r SweepRequest) ([]Result, error) {
	s, err := open(ctx, b, r.Vhost, r.Window, "dlq sweep")
	if err != nil {
		return nil, err
	}
	defer s.close()
	sources, err := s.sources(ctx, r)
	if err != nil {
		return nil, err
	}
	results := []Result{}
	var errs []error
	for _, src := range sources {
		if ctx.Err() != nil {
			break
		}
		verb := "sweeping"
		if r.DryRun {
			verb = "dry run: nothing moves; counting what would sweep"
		}
		fmt.Fprintf(r.Log, "%s %s into %s\n", verb, src.Queue.Name, src.Target)
		p := passProgress(r.Log)
		res, err := SweepQueue(ctx, s.conn, src, SweepRun{MaxDeaths: r.MaxDeaths, Window: r.Window,
			Progress: p.Update, CreateTarget: r.Unmanaged, DryRun: r.DryRun})
		p.Stop()
		results = append(results, res)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", src.Queue.Name, err))
			if s.conn.IsClosed() {
				break
			}
		}
	}
	if !r.DryRun {
		fmt.Fprintln(r.Log, "sweep keeps every header as it was")
	}
	for _, res := range results {
		warn(r.Log, res)
	}
	return results, errors.Join(errs...)
}

// sources are the queues a sweep scans, each checked as a queue to leave
// messages in, with targets it may use.
func (s *session) sources(ctx context.Context, r SweepRequest) ([]SweepSource, error) {
	queues, err := s.b.Queues(ctx, r.Vhost)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("vhost %q not found", r.Vhost)
	}
	if err != nil {
		return nil, err
	}
	sources, err := PlanSweep(queues, r.SweepOptions)
	if err != nil {
		return nil, fmt.Errorf("vhost %q: %w", r.Vhost, err)
	}
	for _, src := range sources {
		if err := CheckLeaveSafe(src.Queue, s.major); err != nil {
			return nil, err
		}
	}
	declared := map[string]bool{}
	if r.Declared != nil {
		if declared, err = r.Declared(); err != nil {
			return nil, err
		}
	}
	return sources, CheckSweepTargets(sources, queues, declared, r.Unmanaged, r.DryRun)
}

// MovesError is the error of a replay or sweep: the passes' errors on one
// line, else the messages that could not be moved.
func MovesError(results []Result, err error) error {
	if err != nil {
		return errors.New(strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	if failed := Sum(results).Failed; failed > 0 {
		return fmt.Errorf("%d %s could not be moved and stayed where they were", failed, english.Plural(failed, "message", "messages"))
	}
	return nil
}

// passProgress reports a pass's progress about once a second; passes
// shorter than a second report nothing.
func passProgress(w io.Writer) *progress.Reporter[Result] {
	return progress.Start(w, progress.Options[Result]{Line: FormatProgress})
}

func warn(w io.Writer, r Result) {
	for _, msg := range r.Warnings {
		fmt.Fprintf(w, "warning: %s: %s\n", r.Queue, msg)
	}
}
