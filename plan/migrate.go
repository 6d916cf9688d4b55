package plan

import (
	"fmt"
	"slices"
	"sort"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Migration says which queue replaces become migrations: the queue's
// messages are moved, with confirms, to a temporary queue
// (contract.MigrationQueue) bound like it, the queue is re-created with
// its new properties and its bindings, and the messages are moved back.
// Nothing is destroyed, so a migration does not need --allow-destroy.
type Migration struct {
	// All migrates every queue replace that can be migrated (--migrate).
	All bool
	// Queues migrates the replaces of these queues (migrate: true in the
	// spec).
	Queues map[topology.Address]bool
}

func (m Migration) chosen(a topology.Address) bool { return m.All || m.Queues[a] }

// Diagnostic codes of migrations; the table in the package doc explains them.
const (
	CodeMigrateQueue      = "RT030"
	CodeMigrationOrphaned = "RT031"
)

// migratableTypes are the queue types a migration moves messages out of
// and into: a stream is read without removing messages, so "until empty"
// means nothing for it.
var migratableTypes = map[string]bool{"classic": true, "quorum": true}

// whyNotMigratable says why a replace of was by want cannot be a
// migration, or "" when it can.
func whyNotMigratable(was, want topology.Queue) string {
	for _, t := range []string{was.QueueType(), want.QueueType()} {
		if !migratableTypes[t] {
			return fmt.Sprintf("migration moves messages of classic and quorum queues only, not of a %s queue", t)
		}
	}
	if was.AutoDelete {
		// Moving out consumes it: when the move's consumer leaves, the
		// broker deletes it, with whatever came back to it meanwhile.
		return "an auto-delete queue cannot be migrated: the broker deletes it when the migration's consumer leaves it"
	}
	return ""
}

// splitMigrations takes out of live the temporary queues of migrations in
// progress, so that the diff never plans them as objects of their own
// (pruned, or their bindings reconciled away): they are the record of a
// migration, which the plan resumes. Their bindings count as the migrated
// queue's, because the migration gives them back to it before it deletes
// the temporary queue. A queue the spec itself declares under such a name
// stays an ordinary queue. The result maps each migrated queue's address
// to its temporary queue.
func splitMigrations(live, desired topology.Topology) (topology.Topology, map[topology.Address]topology.Queue) {
	if !slices.ContainsFunc(live.Queues, func(q topology.Queue) bool {
		_, ok := contract.ParseMigrationQueue(q.Name)
		return ok
	}) {
		return live, nil // the usual case: no set of every desired queue
	}
	wanted := map[topology.Address]bool{}
	for _, q := range desired.Queues {
		wanted[q.Addr()] = true
	}
	inflight := map[topology.Address]topology.Queue{}
	owner := map[topology.Address]string{}
	var queues []topology.Queue
	for _, q := range live.Queues {
		if name, ok := contract.ParseMigrationQueue(q.Name); ok && !wanted[q.Addr()] {
			inflight[topology.Address{Kind: topology.KindQueue, Vhost: q.Vhost, Name: name}] = q
			owner[q.Addr()] = name
			continue
		}
		queues = append(queues, q)
	}
	if len(inflight) == 0 {
		return live, nil
	}
	bindings := make([]topology.Binding, 0, len(live.Bindings))
	for _, b := range live.Bindings {
		if q, ok := owner[destinationAddr(b)]; ok && b.DestinationType == topology.DestQueue {
			b.Destination = q
		}
		bindings = append(bindings, b)
	}
	out := live
	out.Queues, out.Bindings = queues, bindings
	return out, inflight
}

// migrate turns the queue changes of a migration into Migrate: a replace
// the user chose to migrate, and any change of a queue whose migration is
// in progress (its temporary queue exists), which is resumed whatever the
// choice, because its messages are in the temporary queue. It runs after
// the queues are diffed and before the bindings are, so that a migrated
// queue's bindings are planned as bindings of a queue that stays (the
// migration restores them itself).
func (d *differ) migrate(inflight map[topology.Address]topology.Queue) {
	handled := map[topology.Address]bool{}
	for i := range d.changes {
		c := &d.changes[i]
		a := c.Address
		if a.Kind != topology.KindQueue || c.After == nil || c.After.Queue == nil {
			continue
		}
		temp, resuming := inflight[a]
		switch {
		case resuming:
			handled[a] = true
			resumes := Reason{Kind: ReasonResumes, Subject: temp.Name}
			if c.Action == Replace {
				c.Detail().Reasons = append(c.Detail().Reasons, resumes)
			} else {
				c.Detail().Reasons = []Reason{resumes}
			}
			c.Action, c.Detail().Why = Migrate, WhyResumes
		case c.Action == Replace && d.opts.Migrate.chosen(a):
			if why := whyNotMigratable(*c.Before.Queue, *c.After.Queue); why != "" {
				c.Detail().Reasons = append(c.Detail().Reasons, Reason{Kind: ReasonNotMigratable, Text: why})
				continue
			}
			c.Action = Migrate
			c.Detail().Reasons = append(c.Detail().Reasons, Reason{Kind: ReasonMigrated})
		default:
			continue
		}
		delete(d.replaced, a)
		c.Detail().Messages = MigrationMessages(*c, d.opts.Messages)
		c.Detail().Consumers = d.consumers(a)
	}
	d.orphans(inflight, handled)
}

// orphans keeps, as a NoOp the checks warn about, each migration in
// progress of a queue that left the spec: its messages stay in the
// temporary queue until someone moves them.
func (d *differ) orphans(inflight map[topology.Address]topology.Queue, handled map[topology.Address]bool) {
	var left []topology.Address
	for a := range inflight {
		if !handled[a] && d.vhosts[a.Vhost] {
			left = append(left, a)
		}
	}
	sort.Slice(left, func(i, j int) bool { return left[i].Less(left[j]) })
	for _, a := range left {
		temp := inflight[a]
		d.add(Change{Action: NoOp, Address: temp.Addr(), Before: &Object{Queue: &temp}, Details: &Details{Messages: d.messages(temp.Addr()), Reasons: []Reason{{Kind: ReasonMigrationOrphan, Subject: a.Name}}}})
	}
}

// MigrationMessages is the number of messages a Migrate change moves: the
// queue's, plus its temporary queue's when the migration is resumed. Nil
// when a count it needs is unknown; a queue that does not exist (Before is
// nil: a migration stopped between delete and re-declare) holds none.
func MigrationMessages(c Change, counts map[topology.Address]int64) *int64 {
	n, ok := counts[c.Address]
	if !ok {
		if c.Before != nil {
			return nil
		}
		n = 0
	}
	if c.Why() == WhyResumes {
		m, ok := counts[migrationAddr(c.Address)]
		if !ok {
			return nil
		}
		n += m
	}
	return &n
}

func migrationAddr(q topology.Address) topology.Address {
	return topology.Address{Kind: topology.KindQueue, Vhost: q.Vhost, Name: contract.MigrationQueue(q.Name)}
}

// checkMigration is Check's finding about a Migrate change or an orphaned
// migration, if any.
func checkMigration(c Change) (Diagnostic, bool) {
	a := c.Address
	if c.Action == NoOp && a.Kind == topology.KindQueue {
		q, ok := contract.ParseMigrationQueue(a.Name)
		if !ok || c.Before == nil {
			return Diagnostic{}, false
		}
		d := Diagnostic{Code: CodeMigrationOrphaned, Severity: SeverityWarning, Address: a,
			Message: fmt.Sprintf("queue %q in vhost %q holds the messages of an unfinished migration of queue %q, which is no longer in the spec; put the queue back in the spec to finish the migration, or move them by hand",
				a.Name, a.Vhost, q)}
		if c.Messages() != nil {
			d.Messages = *c.Messages()
		}
		return d, true
	}
	if c.Action != Migrate {
		return Diagnostic{}, false
	}
	moves := "an unknown number of messages"
	d := Diagnostic{Code: CodeMigrateQueue, Severity: SeverityInfo, Address: a}
	if c.Messages() != nil {
		moves = countMessages(*c.Messages())
		d.Messages = *c.Messages()
	}
	d.Message = fmt.Sprintf("migrating %s moves %s through queue %q and back, with confirms; "+
		"publishes to %q through the default exchange are unroutable between its delete and re-declare, "+
		"and its consumers are cancelled by the delete and must consume again", a, moves, contract.MigrationQueue(a.Name), a.Name)
	return d, true
}
