package bluegreen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Options configure Move.
type Options struct {
	Files       []*spec.File
	Blue, Green *broker.Client
	// Quiet is how long every queue of the spec on blue must stay empty
	// before the move is over; it must cover blue's statistics interval
	// and a quorum queue's tick (5 s each by default), which the
	// unacknowledged and held counts lag by.
	Quiet time.Duration
	// Poll is how often blue's queues are counted.
	Poll time.Duration
	// Prefetch bounds each shovel's unconfirmed messages (0: 1000).
	Prefetch int
	// Log receives the counts per queue as they change, and the steps.
	Log io.Writer
}

// Result is what Move saw.
type Result struct {
	Layout Layout
	// Rounds is how many times the shovels were declared: more than one
	// when blue took messages again after it had stayed empty.
	Rounds int
}

// Move shovels every message of the spec's queues from blue to green
// (see the package doc) and returns once blue's queues have stayed empty
// for o.Quiet and the shovels are deleted. It may be stopped at any point
// and run again: the shovels it declared go on meanwhile, and a second
// run finds them and waits as the first did.
func Move(ctx context.Context, o Options) (Result, error) {
	l, err := layOut(ctx, o)
	if err != nil {
		return Result{}, err
	}
	res := Result{Layout: l}
	blue, err := o.Blue.NewSession(ctx)
	if err != nil {
		return res, fmt.Errorf("blue: %w", err)
	}
	defer blue.Close()
	w := watch{o: o, s: blue, queues: l.Watched(), last: map[Queue]string{}}
	for {
		res.Rounds++
		if err := startShovels(ctx, o, l.Routes); err != nil {
			return res, err
		}
		if err := w.untilQuiet(ctx); err != nil {
			return res, err
		}
		if err := stopShovels(ctx, o, l.Routes); err != nil {
			return res, err
		}
		left, err := w.ready(ctx)
		if err != nil {
			return res, err
		}
		if left == 0 {
			fmt.Fprintf(o.Log, "upgrade move: blue's %d queues of the spec stayed empty for %s; shovels deleted\n", len(w.queues), o.Quiet)
			return res, nil
		}
		fmt.Fprintf(o.Log, "upgrade move: blue took %d more messages; moving again\n", left)
	}
}

// layOut reads both brokers and lays out the move.
func layOut(ctx context.Context, o Options) (Layout, error) {
	bv, err := o.Blue.Version(ctx)
	if err != nil {
		return Layout{}, fmt.Errorf("blue: %w", err)
	}
	gv, err := o.Green.Version(ctx)
	if err != nil {
		return Layout{}, fmt.Errorf("green: %w", err)
	}
	if !gv.AtLeast(4, 0) {
		return Layout{}, fmt.Errorf("green runs RabbitMQ %s: the move's shovels run on green and need 4.0 or later (src-predeclared)", gv)
	}
	vhosts := map[string]bool{}
	for _, f := range o.Files {
		vhosts[f.Spec.Vhost] = true
	}
	var blueLive, greenLive topology.Topology
	for _, v := range slices.Sorted(maps.Keys(vhosts)) {
		b, err := o.Blue.ReadVhost(ctx, v)
		if err != nil {
			return Layout{}, fmt.Errorf("blue: %w", err)
		}
		g, err := o.Green.ReadVhost(ctx, v)
		if err != nil {
			return Layout{}, fmt.Errorf("green: %w", err)
		}
		blueLive.Queues = append(blueLive.Queues, b.Queues...)
		greenLive.Queues = append(greenLive.Queues, g.Queues...)
	}
	spec.Resolve(o.Files, spec.Target{RabbitMQ: bv, Live: &blueLive})
	l, err := Plan(o.Files, spec.ExpandFor(bv, o.Files...), greenLive)
	if err == nil && len(l.Watched()) == 0 {
		err = ErrNothing
	}
	return l, err
}

// startShovels declares the shovel of each route that green does not
// run yet; one declared by an earlier run is left as it is (declaring it
// again would restart it, which returns its unconfirmed messages to blue
// and so duplicates those green had confirmed but blue not yet seen
// acknowledged).
func startShovels(ctx context.Context, o Options, routes []Route) error {
	declared := map[string]map[string]bool{}
	for _, r := range routes {
		if declared[r.Vhost] == nil {
			names, err := o.Green.ShovelNames(ctx, r.Vhost)
			if err != nil {
				return fmt.Errorf("green: %w", err)
			}
			declared[r.Vhost] = names
		}
		if declared[r.Vhost][ShovelName(r)] {
			continue
		}
		src, err := o.Blue.VhostURI(ctx, r.Vhost)
		if err != nil {
			return fmt.Errorf("blue: %w", err)
		}
		dst, err := o.Green.VhostURI(ctx, r.Vhost)
		if err != nil {
			return fmt.Errorf("green: %w", err)
		}
		err = o.Green.PutShovel(ctx, broker.Shovel{Vhost: r.Vhost, Name: ShovelName(r), SrcURI: src, SrcQueue: r.From,
			DestURI: dst, DestQueue: r.To, Prefetch: o.Prefetch})
		if err != nil {
			return fmt.Errorf("green: %w", err)
		}
		fmt.Fprintf(o.Log, "upgrade move: shovel %s: blue %s -> green %s (vhost %s)\n", ShovelName(r), r.From, r.To, r.Vhost)
	}
	return nil
}

// stopShovels deletes the routes' shovels.
func stopShovels(ctx context.Context, o Options, routes []Route) error {
	for _, r := range routes {
		if err := o.Green.DeleteShovel(ctx, r.Vhost, ShovelName(r)); err != nil {
			return fmt.Errorf("green: %w", err)
		}
	}
	return nil
}

// watch counts blue's queues of the spec.
type watch struct {
	o      Options
	s      *broker.Session
	queues []Queue
	last   map[Queue]string
}

// untilQuiet returns once every queue has been empty for w.o.Quiet: no
// ready message by a passive declare (exact, now) and no message at all
// by the management API's statistics (unacknowledged and held ones
// included, but late).
func (w *watch) untilQuiet(ctx context.Context) error {
	var since time.Time
	for {
		empty, err := w.empty(ctx)
		if err != nil {
			return err
		}
		switch {
		case !empty:
			since = time.Time{}
		case since.IsZero():
			since = time.Now()
		case time.Since(since) >= w.o.Quiet:
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(w.o.Poll):
		}
	}
}

// empty counts every queue once and prints the counts that changed.
func (w *watch) empty(ctx context.Context) (bool, error) {
	empty := true
	var changed []string
	for _, v := range w.vhosts() {
		names := w.names(v)
		ready, err := w.s.PassiveCounts(ctx, v, names)
		if err != nil {
			return false, fmt.Errorf("blue: %w", err)
		}
		stats, err := w.o.Blue.QueueCounts(ctx, v, names)
		if err != nil {
			return false, fmt.Errorf("blue: %w", err)
		}
		for _, n := range names {
			st, known := stats[n]
			r := ready[n].Messages
			if r > 0 || !known || st.Messages > 0 {
				empty = false
			}
			text := fmt.Sprintf("%d ready", r)
			if known {
				text += fmt.Sprintf(", %d in all", st.Messages)
			}
			if q := (Queue{v, n}); w.last[q] != text {
				w.last[q] = text
				changed = append(changed, fmt.Sprintf("%s (%s)", n, text))
			}
		}
	}
	if len(changed) > 0 {
		fmt.Fprintf(w.o.Log, "upgrade move: on blue: %s\n", strings.Join(changed, "; "))
	}
	return empty, nil
}

// ready is the number of ready messages left on blue, exact.
func (w *watch) ready(ctx context.Context) (int, error) {
	total := 0
	for _, v := range w.vhosts() {
		counts, err := w.s.PassiveCounts(ctx, v, w.names(v))
		if err != nil {
			return 0, fmt.Errorf("blue: %w", err)
		}
		for _, c := range counts {
			total += c.Messages
		}
	}
	return total, nil
}

func (w *watch) vhosts() []string {
	seen := map[string]bool{}
	for _, q := range w.queues {
		seen[q.Vhost] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

func (w *watch) names(vhost string) []string {
	var out []string
	for _, q := range w.queues {
		if q.Vhost == vhost {
			out = append(out, q.Name)
		}
	}
	return out
}

// ErrNothing is returned when the spec has no queue to move.
var ErrNothing = errors.New("the spec has no queue on blue to move")
