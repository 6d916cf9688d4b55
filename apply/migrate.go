package apply

import (
	"context"
	"errors"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Migrator is a Target that can migrate a queue (plan.Migrate): re-create
// it with after's properties without losing its messages, through the
// temporary queue contract.MigrationQueue. Like every Target operation it
// is idempotent: it reads where an interrupted migration stands from the
// broker and finishes it.
type Migrator interface {
	MigrateQueue(ctx context.Context, after topology.Queue) error
}

var errCannotMigrate = errors.New("this target cannot migrate queues")

// doMigrate runs a Migrate change.
func (r *runner) doMigrate(ctx context.Context, c plan.Change) error {
	after := queueOf(c.After)
	if after == nil {
		return errMalformed
	}
	m, ok := r.t.(Migrator)
	if !ok {
		return errCannotMigrate
	}
	return m.MigrateQueue(ctx, *after)
}

// migrationQueue is the address of the temporary queue of a Migrate change.
func migrationQueue(c plan.Change) topology.Address {
	return topology.Address{Kind: topology.KindQueue, Vhost: c.Address.Vhost, Name: contract.MigrationQueue(c.Address.Name)}
}

// forgetFinishedMigrations drops from owned the temporary queues that no
// longer exist: a plan names every temporary queue that does (a Migrate of
// its queue resumes it, or a change of its own keeps it), so an owned one
// it does not name was deleted by a migration whose apply was stopped
// before it wrote its final record.
func forgetFinishedMigrations(p plan.Plan, owned map[topology.Address]bool) {
	named := map[topology.Address]bool{}
	for _, c := range p.Changes {
		named[c.Address] = true
		if c.Action == plan.Migrate {
			named[migrationQueue(c)] = true
		}
	}
	for a := range owned {
		if _, ok := contract.ParseMigrationQueue(a.Name); ok && a.Kind == topology.KindQueue && !named[a] {
			delete(owned, a)
		}
	}
}

// keepUnfinishedMigrations records as owned the temporary queue of every
// migration of steps that did not finish: a migration that started leaves
// its temporary queue, which stays rmqtopo's until a later apply finishes
// the migration and deletes it (finalOf then drops it).
func keepUnfinishedMigrations(steps, done []plan.Change, records map[string]topology.Record) {
	finished := map[topology.Address]bool{}
	for _, c := range done {
		finished[c.Address] = true
	}
	for _, c := range steps {
		if r, ok := records[c.Address.Vhost]; ok && c.Action == plan.Migrate && !finished[c.Address] {
			r.Owned[migrationQueue(c)] = true
		}
	}
}
