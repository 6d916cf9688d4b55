package render

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/english"
	"github.com/rmqtopo/rmqtopo/spec"
)

// Schedule writes, per queue, when each delivery of a failing message
// happens and where it goes next: the table that tells an engineer when a
// message will hit the DLQ.
func Schedule(w io.Writer, files []*spec.File, color bool) error {
	st := style(color)
	first := true
	for _, f := range files {
		s := &f.Spec
		for _, q := range s.Queues {
			if q.Raw {
				// A raw queue has no retry schedule.
				continue
			}
			if !first {
				fmt.Fprintln(w)
			}
			first = false
			fmt.Fprintf(w, "%s %s\n", st.bold("queue "+q.Name), describeQueue(s, q))
			// How a retry travels decides whether a handler's RetryAfter
			// is honoured, which the table alone does not show.
			fmt.Fprintf(w, "  %s\n", s.TravelOf(q))
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "  ATTEMPT\tDELAY\tAT\tWAITS IN\tIF IT FAILS")
			upTo, native := false, s.LayoutOf(q) == spec.LayoutNative
			for _, step := range s.Schedule(q) {
				delay, via, at := "-", "-", HumanDuration(step.Elapsed)
				if step.Attempt > 1 {
					delay, via = HumanDuration(step.Delay), step.Via
					if step.Jitter {
						delay = "0-" + delay + " (jitter)"
					}
					switch {
					case native:
						via = q.Name + " (deferred)"
					case step.Via == q.Name:
						via = "(immediate, back of " + q.Name + ")"
					}
				}
				next := step.OnFailure
				if native && next == q.Name {
					next += " (deferred)"
				}
				if q.DLQ && next == spec.DLQOf(q) {
					next = st.red("DLQ " + next)
				}
				// After a jittered delay every total is an upper bound.
				upTo = upTo || step.Jitter
				if upTo {
					at = "≤" + at
				}
				fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\n", step.Attempt, delay, at, via, next)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
		}
		if err := ladderSummary(w, s); err != nil {
			return err
		}
	}
	return nil
}

// ladderSummary writes, for a vhost with a delay ladder, what the ladder
// is and how many wait queues its retries need in each layout.
func ladderSummary(w io.Writer, s *spec.Spec) error {
	l, ok := s.Ladder()
	if !ok {
		return nil
	}
	n := s.WaitQueueCounts()
	_, err := fmt.Fprintf(w, "\nvhost %s: delay ladder of %s, %s steps up to %s, entry %s\n"+
		"  wait queues for these retries: levels %d, shared %d, per-attempt %d\n",
		s.Vhost, english.Count(l.Levels, "level", "levels"), HumanDuration(l.Resolution), l.MaxDelay(), l.EntryExchange(), // exact: the longest delay Delayer.Delay takes
		n[spec.LayoutLevels], n[spec.LayoutShared], n[spec.LayoutPerAttempt])
	return err
}

func describeQueue(s *spec.Spec, q spec.Queue) string {
	parts := []string{"vhost " + s.Vhost, q.Type}
	switch {
	case q.Preset != spec.PresetNone:
		parts = append(parts, "preset "+string(q.Preset))
	case len(q.Retry.Delays()) > 0:
		layout := s.LayoutOf(q)
		parts = append(parts, "layout "+string(layout))
		if layout == spec.LayoutNative {
			parts = append(parts, nativeRoute(q))
		}
	}
	if q.RetryRef != "" {
		parts = append(parts, "policy "+q.RetryRef)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// nativeRoute says how a service retries a queue of the native layout
// (contract.SettleRoute).
func nativeRoute(q spec.Queue) string {
	if spec.NativeRoute(q) == contract.RouteReject {
		return "retried by basic.reject, delayed by the queue"
	}
	return "retried over AMQP 1.0 with x-opt-delivery-time"
}

type styler struct{ on bool }

func style(on bool) styler { return styler{on} }

func (s styler) wrap(code, text string) string {
	if !s.on {
		return text
	}
	return "\x1b[" + code + "m" + text + "\x1b[0m"
}

func (s styler) bold(t string) string { return s.wrap("1", t) }
func (s styler) red(t string) string  { return s.wrap("31", t) }
