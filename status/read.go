package status

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/internal/english"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

// StatsInterval is the management API's default
// collect_statistics_interval: its counts change no more often, so
// re-reading sooner sees the same ones. Options.StatsInterval names a
// broker's own.
const StatsInterval = 5 * time.Second

// Source is what status reads: *broker.Client.
type Source interface {
	// Server returns the broker's version; it fails on a server that is
	// not RabbitMQ.
	Server(ctx context.Context) (string, error)
	ListQueues(ctx context.Context, vhost string) ([]broker.QueueInfo, error)
	GetQueue(ctx context.Context, vhost, name string) (broker.QueueInfo, error)
	plan.Source
}

// Options say what Read reads beyond the queue counts.
type Options struct {
	// Drift compares the live topology with the specs, as plan does.
	Drift bool
	// HeldMargin, when positive, is how long to re-read the wait queues
	// that hold dead-letters, to flag those that forward none (see
	// HeldWatch); the re-read is skipped when its verdict cannot change
	// the exit code.
	HeldMargin time.Duration
	// StatsInterval is the broker's collect_statistics_interval, the pace
	// of the re-reads; 0 means RabbitMQ's default, StatsInterval.
	StatsInterval time.Duration
	// Sleep waits between re-reads; nil sleeps on the clock. Tests pass
	// one that takes no time.
	Sleep func(ctx context.Context, d time.Duration) error
	// Log, if set, is told whether and why the held wait queues are
	// re-read.
	Log io.Writer
	// Flags names the caller's settings that errors and Log's lines
	// point to.
	Flags Flags
}

// Flags names, in the caller's words, the settings Read's errors and log
// lines can point to; the library names none itself (the CLI passes its
// flags). An empty name leaves its hint out.
type Flags struct {
	// NoDrift names the choice that turns Options.Drift off.
	NoDrift string
	// HeldMargin is Options.HeldMargin's name.
	HeldMargin string
}

// hint is format with the setting's name, or nothing without a name.
func hint(format, name string) string {
	if name == "" {
		return ""
	}
	return fmt.Sprintf(format, name)
}

// Read reads the status of the specs' queues from b.
func Read(ctx context.Context, b Source, files []*spec.File, opts Options) (Report, error) {
	// A server that is not RabbitMQ would read as a broker with nothing on
	// it: every queue "missing", exit 0.
	version, err := b.Server(ctx)
	if err != nil {
		return Report{}, err
	}
	vhosts := spec.Expand(files...).VhostNames()
	stats := map[string][]broker.QueueInfo{}
	for _, v := range vhosts {
		qs, err := b.ListQueues(ctx, v)
		if isNotFound(err) {
			continue // no vhost: every queue shows as missing
		}
		if err != nil {
			return Report{}, err
		}
		stats[v] = qs
	}
	var live *topology.State
	if opts.Drift {
		var err error
		if live, err = b.Read(ctx, vhosts); err != nil {
			return Report{}, fmt.Errorf("reading the live topology for drift%s: %w", hint(" (%s skips it)", opts.Flags.NoDrift), err)
		}
	}
	resolveLayouts(files, version, stats, live)
	st := Build(files, stats, live)
	if err := watchHeld(ctx, &st, b, opts); err != nil {
		return Report{}, fmt.Errorf("re-reading wait queues that hold dead-letters: %w", err)
	}
	return st, nil
}

// resolveLayouts lays the spec out as plan does (spec.Resolve): for the
// broker's version, with what is live, from the live topology when drift
// read it, else from the queues listed (their names and arguments tell
// every layout but levels, which then reads as shared).
func resolveLayouts(files []*spec.File, version string, stats map[string][]broker.QueueInfo, live *topology.State) {
	v, _ := topology.ParseVersion(version)
	if live != nil {
		spec.Resolve(files, spec.Target{RabbitMQ: v, Live: &live.Topology})
		return
	}
	var t topology.Topology
	for vhost, qs := range stats {
		for _, q := range qs {
			t.Queues = append(t.Queues, topology.Queue{Vhost: vhost, Name: q.Name, Arguments: q.Arguments})
		}
	}
	spec.Resolve(files, spec.Target{RabbitMQ: v, Live: &t})
}

// isNotFound reports a missing queue or vhost.
func isNotFound(err error) bool {
	return errors.Is(err, broker.ErrNotFound) || errors.Is(err, broker.ErrVhostNotFound)
}

// watchHeld re-reads the wait queues that hold dead-letters for the held
// margin and flags those that forwarded none (HeldWatch). It does not
// wait when the exit code is already certain without the re-read: a
// finding that ranks above stuck dead-letters decides it.
func watchHeld(ctx context.Context, s *Report, b Source, opts Options) error {
	held := HeldQueues(*s)
	if opts.HeldMargin <= 0 || len(held) == 0 {
		return nil
	}
	log := opts.Log
	if log == nil {
		log = io.Discard
	}
	var n int64
	for _, q := range held {
		n += q.Held
	}
	holds := fmt.Sprintf("%d wait %s %d dead-%s",
		len(held), english.Plural(len(held), "queue holds", "queues hold"), n, english.Plural(int(n), "letter", "letters"))
	if code, matters := s.HeldWaitMatters(len(held)); !matters {
		fmt.Fprintf(log, "status: %s; not re-reading%s: the exit code is %d either way\n", holds, hint(" for %s", opts.Flags.HeldMargin), code)
		return nil
	}
	fmt.Fprintf(log, "status: %s; re-reading for up to %s%s\n", holds, opts.HeldMargin, hint(" (%s)", opts.Flags.HeldMargin))
	read := func(ctx context.Context, vhost, name string) (broker.QueueInfo, bool, error) {
		q, err := b.GetQueue(ctx, vhost, name)
		if isNotFound(err) {
			return q, false, nil // deleted since: it holds nothing
		}
		return q, err == nil, err
	}
	every := opts.StatsInterval
	if every <= 0 {
		every = StatsInterval
	}
	w := HeldWatch{Margin: opts.HeldMargin, Every: every, Read: read, Sleep: opts.Sleep}
	stuck, err := w.Stuck(ctx, held)
	if err != nil {
		return err
	}
	MarkStuck(s, opts.HeldMargin, stuck)
	return nil
}
