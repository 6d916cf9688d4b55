// Package status reads the live state of a spec's queues against the spec:
// for every work queue, its wait queues, DLQ and parking lot with their
// depths, consumers and rates, flags for what needs an operator (a DLQ
// holding messages, a work queue without consumers, a missing queue), and
// the drift between the live topology and the spec.
//
// It is a read, like plan: it takes the spec, the broker's queue listing
// and the live topology (read by internal/broker), and builds them into a
// Report: plain data (report.go), which the views draw as a table or as
// JSON (view.go). Drift is plan.Diff's answer, so status and plan always
// agree about what differs. HeldWatch re-reads, through a reader the
// caller gives, the wait queues that hold dead-letters, to tell the ones
// that forward none (held.go). Status changes nothing; moving messages is
// the ops package's job.
package status

import (
	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Build puts together the spec, the queue counts the management API
// reported per vhost, and (when live is not nil) the drift between the live
// topology and the spec as plan.Diff computes it: any change but a no-op.
func Build(files []*spec.File, stats map[string][]broker.QueueInfo, live *topology.State) Report {
	st := Report{FormatVersion: FormatVersion, DriftChecked: live != nil}
	drift, draining := addDrift(&st, files, live)
	b := builder{
		st:      &st,
		stats:   map[vhostQueue]broker.QueueInfo{},
		drift:   drift,
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
	for _, c := range draining {
		st.Draining = append(st.Draining, b.draining(c))
	}
	return st
}

// vhostQueue names a queue across vhosts.
type vhostQueue [2]string

// addDrift diffs live against the spec as plan does (plan.Diff: the
// specs' ownership records, the operator policies, the wait-queue names),
// so that status drift is plan drift: it lists the objects other than
// queues that differ in s.Drift, counts all of them, and returns each
// queue's drift, and the retired wait queues plan keeps while they drain
// (plan's RT004), which are no drift. Without live it does nothing.
func addDrift(s *Report, files []*spec.File, live *topology.State) (map[vhostQueue][]string, []plan.Change) {
	queueDrift := map[vhostQueue][]string{}
	if live == nil {
		return queueDrift, nil
	}
	p := plan.Diff(live, spec.Expand(files...), plan.Choices{Specs: spec.Names(files)})
	var draining []plan.Change
	for _, c := range p.Changes {
		if c.Action == plan.NoOp && c.Why() == plan.WhyDraining && c.Address.Kind == topology.KindQueue {
			draining = append(draining, c)
			continue
		}
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
	return queueDrift, draining
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
		rows = append(rows, QueueStatus{Name: spec.DLQOf(q), Role: RoleDLQ})
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
		row.Delayed = info.Delayed
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
	if row.Role == RoleWork && row.Delayed != nil {
		sum.RetriesDelayed += *row.Delayed
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
