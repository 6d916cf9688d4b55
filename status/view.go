package status

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/rmqtopo/rmqtopo/internal/english"
)

// The views of `rmqtopo status`: a status report (built by Read) as a
// table per work queue, or as JSON.

// JSON writes a status report as one indented JSON document.
func JSON(w io.Writer, s Report) error {
	return writeJSON(w, s)
}

// Text writes a status report as a table per work queue, then the
// drift and a summary line. color highlights flags.
func Text(w io.Writer, s Report, color bool) error {
	p := palette{on: color}
	if err := statusTables(w, s, p); err != nil {
		return err
	}
	if len(s.Drift) > 0 {
		fmt.Fprintf(w, "\n%s:\n", p.wrap("33", fmt.Sprintf("%d other %s differ from the spec", len(s.Drift), english.Plural(len(s.Drift), "object", "objects"))))
		for _, d := range s.Drift {
			line := fmt.Sprintf("  %s %s", d.Action, d.Address)
			if d.Reason != "" {
				line += " (" + d.Reason + ")"
			}
			fmt.Fprintln(w, line)
		}
	}
	_, err := fmt.Fprintf(w, "\n%s\n", statusSummary(s, p))
	return err
}

// statusTables writes one table per work queue, each row aligned across
// all tables, followed by the drift of its queues.
func statusTables(w io.Writer, s Report, p palette) error {
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 4, 2, ' ', 0)
	t := statusTable{p: p, delayed: countsDelayed(s)}
	for i, wq := range s.Queues {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		fmt.Fprintf(tw, "queue %s (vhost %s, %s)\n", wq.Queue, wq.Vhost, wq.File)
		t.header(tw)
		for _, q := range wq.Queues {
			t.row(tw, q)
		}
		for _, q := range wq.Queues {
			for _, d := range q.Drift {
				fmt.Fprintf(tw, "  drift: queue %s: %s\n", q.Name, d)
			}
		}
	}
	t.draining(tw, s)
	if err := tw.Flush(); err != nil {
		return err
	}
	// A row without flags ends in padding.
	for _, line := range strings.SplitAfter(table.String(), "\n") {
		if _, err := io.WriteString(w, strings.TrimRight(line, " \n")+strings.Repeat("\n", strings.Count(line, "\n"))); err != nil {
			return err
		}
	}
	return nil
}

// statusTable writes the tables' headers and rows. Its DELAYED column,
// the messages a queue itself holds back until their delay is over
// (RabbitMQ 4.3's delayed retry), is there only when the broker counts
// them for some queue.
type statusTable struct {
	p       palette
	delayed bool
}

// countsDelayed reports whether the broker counted delayed messages for
// any queue of s.
func countsDelayed(s Report) bool {
	for _, wq := range s.Queues {
		for _, q := range wq.Queues {
			if q.Delayed != nil {
				return true
			}
		}
	}
	for _, q := range s.Draining {
		if q.Delayed != nil {
			return true
		}
	}
	return false
}

func (t statusTable) header(tw io.Writer) {
	delayed := ""
	if t.delayed {
		delayed = "DELAYED\t"
	}
	fmt.Fprintf(tw, "  QUEUE\tROLE\tMESSAGES\tREADY\tUNACKED\t%sCONSUMERS\tIN/S\tOUT/S\tFLAGS\n", delayed)
}

// draining writes, per vhost, the retired wait queues kept while they
// drain, in the columns of the work queues' tables.
func (t statusTable) draining(tw io.Writer, s Report) {
	for i, q := range s.Draining {
		if i == 0 || q.Vhost != s.Draining[i-1].Vhost {
			if i > 0 || len(s.Queues) > 0 {
				fmt.Fprintln(tw)
			}
			fmt.Fprintf(tw, "retired wait queues draining (vhost %s): no queue of the spec uses them; a later apply deletes each once empty\n", q.Vhost)
			t.header(tw)
		}
		t.row(tw, q.QueueStatus)
	}
}

// row writes one queue's row of a table.
func (t statusTable) row(tw io.Writer, q QueueStatus) {
	role := waitRole(q)
	var flags []string
	for _, f := range q.Flags {
		code := "33" // yellow
		if f == FlagDLQNotEmpty || f == FlagMissing || f == FlagStuck {
			code = "31" // red
		}
		flags = append(flags, t.p.wrap(code, f))
	}
	delayed := ""
	if t.delayed {
		delayed = "-\t"
		if q.Present && q.Delayed != nil {
			delayed = strconv.FormatInt(*q.Delayed, 10) + "\t"
		}
	}
	if !q.Present {
		fmt.Fprintf(tw, "  %s\t%s\t-\t-\t-\t%s-\t-\t-\t%s\n", q.Name, role, delayed, strings.Join(flags, " "))
		return
	}
	fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%d\t%s%d\t%s\t%s\t%s\n", q.Name, role, q.Messages, q.Ready, q.Unacked,
		delayed, q.Consumers, rate(q.PublishRate), rate(q.DeliverRate), strings.Join(flags, " "))
}

// waitRole describes a queue's role; a wait queue's with its delay and the
// retries that wait in it, or, for a level of a delay ladder, its level
// and how soon what waits there is due.
func waitRole(q QueueStatus) string {
	var role string
	switch {
	case q.Role != RoleWait:
		return q.Role
	case q.Level != nil:
		role = fmt.Sprintf("ladder level %d: wait %s, due within %s", *q.Level, q.Delay, q.DueWithin)
	case len(q.Retries) == 0 && q.Delay != "":
		role = "wait " + q.Delay
	case len(q.Retries) == 0:
		role = "wait"
	default:
		role = fmt.Sprintf("wait %s (%s %s)", q.Delay, english.Plural(len(q.Retries), "retry", "retries"), joinInts(q.Retries))
	}
	if q.Shared {
		role += ", shared"
	}
	return role
}

// statusSummary says in one line what the status found.
func statusSummary(s Report, p palette) string {
	sum := s.Summary
	parts := []string{fmt.Sprintf("%d work %s", len(s.Queues), english.Plural(len(s.Queues), "queue", "queues"))}
	if sum.DLQsNotEmpty > 0 {
		parts = append(parts, p.wrap("31", fmt.Sprintf("%d %s holding %d %s", sum.DLQsNotEmpty, english.Plural(sum.DLQsNotEmpty, "DLQ", "DLQs"), sum.DLQMessages, english.Plural(int(sum.DLQMessages), "message", "messages"))))
	} else {
		parts = append(parts, "DLQs empty")
	}
	if sum.WithoutConsumers > 0 {
		parts = append(parts, fmt.Sprintf("%d without consumers", sum.WithoutConsumers))
	}
	if sum.MissingQueues > 0 {
		parts = append(parts, fmt.Sprintf("%d %s missing", sum.MissingQueues, english.Plural(sum.MissingQueues, "queue", "queues")))
	}
	if sum.DeadLettersHeld > 0 {
		parts = append(parts, p.wrap("33", fmt.Sprintf("%d dead-%s held in wait queues (waiting for their work queue to confirm them)",
			sum.DeadLettersHeld, english.Plural(int(sum.DeadLettersHeld), "letter", "letters"))))
	}
	if sum.WaitQueuesStuck > 0 {
		parts = append(parts, p.wrap("31", fmt.Sprintf("%d wait %s forwarded none of %d held dead-%s in %s (stuck)",
			sum.WaitQueuesStuck, english.Plural(sum.WaitQueuesStuck, "queue", "queues"), sum.DeadLettersStuck,
			english.Plural(int(sum.DeadLettersStuck), "letter", "letters"), s.HeldMargin)))
	}
	if sum.RetriesWaiting > 0 {
		parts = append(parts, fmt.Sprintf("%d %s waiting in return queues", sum.RetriesWaiting, english.Plural(int(sum.RetriesWaiting), "retry", "retries")))
	}
	if sum.RetriesDelayed > 0 {
		parts = append(parts, fmt.Sprintf("%d %s delayed inside work queues", sum.RetriesDelayed, english.Plural(int(sum.RetriesDelayed), "retry", "retries")))
	}
	if sum.RetiredDraining > 0 {
		parts = append(parts, fmt.Sprintf("%d %s draining in %d retired wait %s", sum.RetiredMessages, english.Plural(int(sum.RetiredMessages), "message", "messages"),
			sum.RetiredDraining, english.Plural(sum.RetiredDraining, "queue", "queues")))
	}
	if sum.Migrations > 0 {
		parts = append(parts, p.wrap("33", fmt.Sprintf("%d %s in progress (rmqtopo apply finishes it)", sum.Migrations, english.Plural(sum.Migrations, "migration", "migrations"))))
	}
	switch {
	case !s.DriftChecked:
		parts = append(parts, "drift not checked")
	case sum.DriftedObjects > 0:
		parts = append(parts, fmt.Sprintf("%d drifted %s (see rmqtopo plan)", sum.DriftedObjects, english.Plural(sum.DriftedObjects, "object", "objects")))
	default:
		parts = append(parts, "no drift")
	}
	return strings.Join(parts, ", ")
}

// rate is a per-second rate to one decimal; an idle queue shows a bare 0.
func rate(r float64) string {
	if r == 0 {
		return "0"
	}
	return strconv.FormatFloat(r, 'f', 1, 64)
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// palette colours the view's flags and summary for a terminal (the plan's
// colours: red for what needs an operator, yellow for what is under way),
// and is the identity when off.
type palette struct{ on bool }

func (p palette) wrap(code, text string) string {
	if !p.on || text == "" {
		return text
	}
	return "\x1b[" + code + "m" + text + "\x1b[0m"
}

// writeJSON writes v as one indented JSON document, as the status view's
// JSON always was.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
