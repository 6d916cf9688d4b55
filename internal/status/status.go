// Package status reads the live state of a spec's queues against the spec:
// for every work queue, its wait queues, DLQ and parking lot with their
// depths, consumers and rates, flags for what needs an operator (a DLQ
// holding messages, a work queue without consumers, a missing queue), and
// the drift between the live topology and the spec.
//
// It is a read, like plan: it takes the spec, the broker's queue listing
// and the live topology (read by internal/broker), and renders them as a
// table or as JSON. Drift is plan.Diff's answer, so status and plan always
// agree about what differs. HeldWatch re-reads, through a reader the
// caller gives, the wait queues that hold dead-letters, to tell the ones
// that forward none (held.go). Status changes nothing; moving messages is
// the ops package's job.
package status

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Roles of a queue in a work queue's retry topology.
const (
	RoleWork       = "work"
	RoleWait       = "wait"
	RoleDLQ        = "dlq"
	RoleParkingLot = "parking-lot"
	// RoleMigration is the temporary queue of a migration in progress
	// (contract.MigrationQueue): it holds the queue's messages until the
	// migration, resumed by the next apply, moves them back.
	RoleMigration = "migration"
)

// Flags status raises on a queue.
const (
	FlagDLQNotEmpty = "dlq-not-empty"
	FlagNoConsumers = "no-consumers"
	FlagMissing     = "missing"
	FlagDrift       = "drift"
	FlagMigrating   = "migration-in-progress"
	// FlagHeld marks a wait queue holding expired messages that the broker
	// has not yet dead-lettered to their work queue: a quorum queue's
	// at-least-once dead-lettering waits for the target to confirm, which
	// after a node loss can take the broker's
	// dead_letter_worker_publisher_confirm_timeout (docs/operations.md).
	FlagHeld = "dead-letters-held"
)

// FormatVersion is the version of Report's JSON form.
const FormatVersion = 1

// QueueStatus is one queue of a work queue's topology as the broker sees it.
type QueueStatus struct {
	Name string `json:"name"`
	Role string `json:"role"`
	// Delay and Retries describe a wait queue: the delay, and the retry
	// numbers that wait in it (1 for the first retry, whose messages carry
	// contract.HeaderAttempt "2").
	Delay   string `json:"delay,omitempty"`
	Retries []int  `json:"retries,omitempty"`
	// Shared is set on a wait queue other work queues of the vhost also use,
	// whose counts are therefore theirs too.
	Shared   bool  `json:"shared,omitempty"`
	Present  bool  `json:"present"`
	Messages int64 `json:"messages"`
	Ready    int64 `json:"messages_ready"`
	Unacked  int64 `json:"messages_unacknowledged"`
	// Held is, for a wait queue, the dead-letters waiting to be forwarded
	// (broker.QueueInfo.DeadLettersHeld: messages_dlx, or the messages
	// counted but neither ready nor delivered).
	Held int64 `json:"dead_letters_held,omitempty"`
	// Stuck is, for a wait queue flagged FlagStuck, the dead-letters it
	// held at the last reading of the held margin.
	Stuck       int64    `json:"dead_letters_stuck,omitempty"`
	Consumers   int64    `json:"consumers"`
	PublishRate float64  `json:"publish_rate"`
	DeliverRate float64  `json:"deliver_rate"`
	Flags       []string `json:"flags,omitempty"`
	// Drift says how the queue differs from the spec.
	Drift []string `json:"drift,omitempty"`
}

// WorkQueueStatus is a work queue of a spec and the queues around it.
type WorkQueueStatus struct {
	Vhost  string        `json:"vhost"`
	File   string        `json:"file"`
	Queue  string        `json:"queue"`
	Queues []QueueStatus `json:"queues"`
}

// DriftItem is one object that differs from the spec.
type DriftItem struct {
	Action  plan.Action `json:"action"`
	Address string      `json:"address"`
	Reason  string      `json:"reason,omitempty"`
}

// Report is the status of every queue of a set of specs.
type Report struct {
	FormatVersion int               `json:"format_version"`
	Queues        []WorkQueueStatus `json:"work_queues"`
	// DriftChecked is false when the live topology was not read; Drift
	// then says nothing.
	DriftChecked bool `json:"drift_checked"`
	// Drift lists the exchanges, bindings, policies and vhosts that differ
	// from the spec; queues carry their own.
	Drift []DriftItem `json:"drift,omitempty"`
	// HeldMargin is how long status re-read the wait queues that held
	// dead-letters (status --exit-code); empty when it did not.
	HeldMargin string  `json:"held_margin,omitempty"`
	Summary    Summary `json:"summary"`
}

// Summary counts what status flags.
type Summary struct {
	DLQsNotEmpty      int   `json:"dlqs_not_empty"`
	DLQMessages       int64 `json:"dlq_messages"`
	WithoutConsumers  int   `json:"work_queues_without_consumers"`
	MissingQueues     int   `json:"missing_queues"`
	DriftedObjects    int   `json:"drifted_objects"`
	MessagesInRetries int64 `json:"messages_in_wait_queues"`
	// Migrations counts the migrations in progress: their temporary
	// queues exist.
	Migrations int `json:"migrations_in_progress,omitempty"`
	// DeadLettersHeld counts the expired messages wait queues hold until
	// their work queue confirms them (FlagHeld).
	DeadLettersHeld int64 `json:"dead_letters_held,omitempty"`
	// WaitQueuesStuck counts the wait queues that forwarded none of their
	// held dead-letters within the held margin (FlagStuck), and
	// DeadLettersStuck what they held at the last reading.
	WaitQueuesStuck  int   `json:"wait_queues_stuck,omitempty"`
	DeadLettersStuck int64 `json:"dead_letters_stuck,omitempty"`
	// RetriesWaiting counts the ready messages of return queues: retries
	// whose delay is over, waiting to be picked up (RoleReturn).
	RetriesWaiting int64 `json:"retries_waiting,omitempty"`
}

// Build puts together the spec, the queue counts the management API
// reported per vhost, and (when live is not nil) the drift between the live
// topology and the spec as plan.Diff computes it: any change but a no-op.
func Build(files []*spec.File, stats map[string][]broker.QueueInfo, live *topology.State) Report {
	st := Report{FormatVersion: FormatVersion, DriftChecked: live != nil}
	b := builder{
		st:      &st,
		stats:   map[vhostQueue]broker.QueueInfo{},
		drift:   st.addDrift(files, live),
		users:   waitQueueUsers(files),
		counted: map[vhostQueue]bool{},
	}
	for vhost, qs := range stats {
		for _, q := range qs {
			b.stats[vhostQueue{vhost, q.Name}] = q
		}
	}
	for _, f := range files {
		for _, q := range f.Spec.Queues {
			st.Queues = append(st.Queues, b.workQueue(f, q))
		}
	}
	return st
}

// vhostQueue names a queue across vhosts.
type vhostQueue [2]string

// addDrift diffs live against the spec as plan does (plan.DiffState: the
// specs' ownership records, the operator policies, the wait-queue names),
// so that status drift is plan drift: it lists the objects other than
// queues that differ in s.Drift, counts all of them, and returns each
// queue's drift. Without live it does nothing.
func (s *Report) addDrift(files []*spec.File, live *topology.State) map[vhostQueue][]string {
	queueDrift := map[vhostQueue][]string{}
	if live == nil {
		return queueDrift
	}
	p := plan.DiffState(live, spec.Expand(files...), plan.Choices{Specs: spec.Names(files)})
	for _, c := range p.Changes {
		if c.Action == plan.NoOp {
			continue
		}
		s.Summary.DriftedObjects++
		if c.Address.Kind == topology.KindQueue {
			why := c.Action.String()
			if c.Reason() != "" {
				why += ": " + c.Reason()
			}
			k := vhostQueue{c.Address.Vhost, c.Address.Name}
			queueDrift[k] = append(queueDrift[k], why)
			continue
		}
		s.Drift = append(s.Drift, DriftItem{Action: c.Action, Address: c.Address.String(), Reason: c.Reason()})
	}
	return queueDrift
}

// waitQueueUsers counts the work queues of its vhost that use each wait
// queue: a wait queue with several is shared.
func waitQueueUsers(files []*spec.File) map[vhostQueue]int {
	users := map[vhostQueue]int{}
	for _, f := range files {
		for _, q := range f.Spec.Queues {
			for _, w := range waitQueues(&f.Spec, q) {
				users[vhostQueue{f.Spec.Vhost, w.Name}]++
			}
		}
	}
	return users
}

// builder fills the rows of a Report, one work queue after another.
type builder struct {
	st    *Report
	stats map[vhostQueue]broker.QueueInfo
	drift map[vhostQueue][]string
	users map[vhostQueue]int
	// counted: a wait queue shared by several work queues counts once in
	// the summary.
	counted map[vhostQueue]bool
}

// workQueue returns the status of work queue q of file f: the queue, its
// wait queues in retry order, its DLQ and its parking lot.
func (b *builder) workQueue(f *spec.File, q spec.Queue) WorkQueueStatus {
	vhost := f.Spec.Vhost
	wq := WorkQueueStatus{Vhost: vhost, File: f.Path, Queue: q.Name}
	rows := []QueueStatus{{Name: q.Name, Role: RoleWork}}
	for _, w := range waitQueues(&f.Spec, q) {
		w.Shared = b.users[vhostQueue{vhost, w.Name}] > 1
		rows = append(rows, w)
	}
	rows = append(rows, returnRows(q)...)
	if q.DLQ {
		rows = append(rows, QueueStatus{Name: contract.DeadLetterQueue(q.Name), Role: RoleDLQ})
	}
	if q.ParkingLot {
		rows = append(rows, QueueStatus{Name: contract.ParkingLotQueue(q.Name), Role: RoleParkingLot})
	}
	rows = b.withMigrations(vhost, rows)
	for _, row := range rows {
		wq.Queues = append(wq.Queues, b.fill(vhost, row))
	}
	return wq
}

// fill gives a row its counts, drift and flags, and counts them in the
// summary.
func (b *builder) fill(vhost string, row QueueStatus) QueueStatus {
	k := vhostQueue{vhost, row.Name}
	var held int64
	if info, ok := b.stats[k]; ok {
		row.Present = true
		row.Messages, row.Ready, row.Unacked = info.Messages, info.Ready, info.Unacked
		row.Consumers, row.PublishRate, row.DeliverRate = info.Consumers, info.PublishRate, info.DeliverRate
		held = info.DeadLettersHeld()
	}
	row.Drift = b.drift[k]
	first := !b.counted[k]
	b.counted[k] = true
	sum := &b.st.Summary
	switch {
	case !row.Present:
		row.Flags = append(row.Flags, FlagMissing)
		if first {
			sum.MissingQueues++
		}
	case row.Role == RoleWork && row.Consumers == 0:
		row.Flags = append(row.Flags, FlagNoConsumers)
		sum.WithoutConsumers++
	case row.Role == RoleDLQ && row.Messages > 0:
		row.Flags = append(row.Flags, FlagDLQNotEmpty)
		sum.DLQsNotEmpty++
		sum.DLQMessages += row.Messages
	case row.Role == RoleWait && held > 0:
		row.Held = held
		row.Flags = append(row.Flags, FlagHeld)
		if first {
			sum.MessagesInRetries += row.Messages
			sum.DeadLettersHeld += row.Held
		}
	case row.Role == RoleWait && first:
		sum.MessagesInRetries += row.Messages
	case row.Role == RoleReturn && first:
		b.countReturn(&row)
	case row.Role == RoleMigration:
		row.Flags = append(row.Flags, FlagMigrating)
		sum.Migrations++
	}
	if len(row.Drift) > 0 {
		row.Flags = append(row.Flags, FlagDrift)
	}
	return row
}

// waitQueues returns the wait queues of q in retry order, one row per
// queue with every retry that waits in it. Immediate retries wait nowhere.
func waitQueues(s *spec.Spec, q spec.Queue) []QueueStatus {
	var out []QueueStatus
	index := map[string]int{}
	for _, step := range s.Schedule(q) {
		if step.Via == "" || step.Via == q.Name {
			continue
		}
		retry := step.Attempt - 1
		if rows, ok := levelRows(s, q, step.Via); ok {
			if _, seen := index[step.Via]; !seen {
				index[step.Via] = len(out)
				out = append(out, rows...)
			}
			continue
		}
		if i, ok := index[step.Via]; ok {
			out[i].Retries = append(out[i].Retries, retry)
			continue
		}
		index[step.Via] = len(out)
		out = append(out, QueueStatus{Name: step.Via, Role: RoleWait, Delay: contract.FormatDelay(step.Delay), Retries: []int{retry}})
	}
	return out
}

// DLQHasMessages reports whether any DLQ of the status holds messages.
func (s Report) DLQHasMessages() bool { return s.Summary.DLQsNotEmpty > 0 }

// WriteJSON writes the status as one indented JSON document.
func (s Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

// WriteText writes the status as a table per work queue, then the drift
// and a summary line. color highlights flags.
func (s Report) WriteText(w io.Writer, color bool) error {
	if err := s.writeTables(w, color); err != nil {
		return err
	}
	if len(s.Drift) > 0 {
		fmt.Fprintf(w, "\n%s:\n", paint(color, "33", fmt.Sprintf("%d other %s differ from the spec", len(s.Drift), plural(len(s.Drift), "object", "objects"))))
		for _, d := range s.Drift {
			line := fmt.Sprintf("  %s %s", d.Action, d.Address)
			if d.Reason != "" {
				line += " (" + d.Reason + ")"
			}
			fmt.Fprintln(w, line)
		}
	}
	_, err := fmt.Fprintf(w, "\n%s\n", s.summaryLine(color))
	return err
}

// paint colours text with an ANSI colour code when color is set.
func paint(color bool, code, text string) string {
	if !color || text == "" {
		return text
	}
	return "\x1b[" + code + "m" + text + "\x1b[0m"
}

// writeTables writes one table per work queue, each row aligned across
// all tables, followed by the drift of its queues.
func (s Report) writeTables(w io.Writer, color bool) error {
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 4, 2, ' ', 0)
	for i, wq := range s.Queues {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		fmt.Fprintf(tw, "queue %s (vhost %s, %s)\n", wq.Queue, wq.Vhost, wq.File)
		fmt.Fprintln(tw, "  QUEUE\tROLE\tMESSAGES\tREADY\tUNACKED\tCONSUMERS\tIN/S\tOUT/S\tFLAGS")
		for _, q := range wq.Queues {
			writeRow(tw, q, color)
		}
		for _, q := range wq.Queues {
			for _, d := range q.Drift {
				fmt.Fprintf(tw, "  drift: queue %s: %s\n", q.Name, d)
			}
		}
	}
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

// writeRow writes one queue's row of a table.
func writeRow(tw io.Writer, q QueueStatus, color bool) {
	role := q.Role
	if q.Role == RoleWait {
		role = fmt.Sprintf("wait %s (%s %s)", q.Delay, plural(len(q.Retries), "retry", "retries"), joinInts(q.Retries))
		if q.Shared {
			role += ", shared"
		}
	}
	var flags []string
	for _, f := range q.Flags {
		code := "33" // yellow
		if f == FlagDLQNotEmpty || f == FlagMissing || f == FlagStuck {
			code = "31" // red
		}
		flags = append(flags, paint(color, code, f))
	}
	if !q.Present {
		fmt.Fprintf(tw, "  %s\t%s\t-\t-\t-\t-\t-\t-\t%s\n", q.Name, role, strings.Join(flags, " "))
		return
	}
	fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", q.Name, role, q.Messages, q.Ready, q.Unacked,
		q.Consumers, rate(q.PublishRate), rate(q.DeliverRate), strings.Join(flags, " "))
}

// summaryLine says in one line what the status found.
func (s Report) summaryLine(color bool) string {
	sum := s.Summary
	parts := []string{fmt.Sprintf("%d work %s", len(s.Queues), plural(len(s.Queues), "queue", "queues"))}
	if sum.DLQsNotEmpty > 0 {
		parts = append(parts, paint(color, "31", fmt.Sprintf("%d %s holding %d %s", sum.DLQsNotEmpty, plural(sum.DLQsNotEmpty, "DLQ", "DLQs"), sum.DLQMessages, plural(int(sum.DLQMessages), "message", "messages"))))
	} else {
		parts = append(parts, "DLQs empty")
	}
	if sum.WithoutConsumers > 0 {
		parts = append(parts, fmt.Sprintf("%d without consumers", sum.WithoutConsumers))
	}
	if sum.MissingQueues > 0 {
		parts = append(parts, fmt.Sprintf("%d %s missing", sum.MissingQueues, plural(sum.MissingQueues, "queue", "queues")))
	}
	if sum.DeadLettersHeld > 0 {
		parts = append(parts, paint(color, "33", fmt.Sprintf("%d dead-%s held in wait queues (waiting for their work queue to confirm them)",
			sum.DeadLettersHeld, plural(int(sum.DeadLettersHeld), "letter", "letters"))))
	}
	if sum.WaitQueuesStuck > 0 {
		parts = append(parts, paint(color, "31", fmt.Sprintf("%d wait %s forwarded none of %d held dead-%s in %s (stuck)",
			sum.WaitQueuesStuck, plural(sum.WaitQueuesStuck, "queue", "queues"), sum.DeadLettersStuck,
			plural(int(sum.DeadLettersStuck), "letter", "letters"), s.HeldMargin)))
	}
	if sum.RetriesWaiting > 0 {
		parts = append(parts, fmt.Sprintf("%d %s waiting in return queues", sum.RetriesWaiting, plural(int(sum.RetriesWaiting), "retry", "retries")))
	}
	if sum.Migrations > 0 {
		parts = append(parts, paint(color, "33", fmt.Sprintf("%d %s in progress (rmqtopo apply finishes it)", sum.Migrations, plural(sum.Migrations, "migration", "migrations"))))
	}
	switch {
	case !s.DriftChecked:
		parts = append(parts, "drift not checked")
	case sum.DriftedObjects > 0:
		parts = append(parts, fmt.Sprintf("%d drifted %s (see rmqtopo plan)", sum.DriftedObjects, plural(sum.DriftedObjects, "object", "objects")))
	default:
		parts = append(parts, "no drift")
	}
	return strings.Join(parts, ", ")
}

func rate(r float64) string {
	if r == 0 {
		return "0"
	}
	return strconv.FormatFloat(r, 'f', 1, 64)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}
