package apply

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/rmqtopo/rmqtopo/apply/target"
	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

// intentOf returns, for each vhost the plan touches, the spec's record as
// it will be once everything the plan creates exists: the plan's desired
// objects as claims, and as owned what was owned plus what it creates.
// The spec of a vhost is that of its record in have.
func intentOf(p plan.Plan, steps []plan.Change, have map[string]topology.Record) map[string]topology.Record {
	out := map[string]topology.Record{}
	for v, r := range have {
		next := r.Clone()
		next.Claims = plan.Claims(p, v)
		out[v] = next
	}
	adoptRetired(p, out)
	for _, c := range steps {
		r, ok := out[c.Address.Vhost]
		if !ok || c.Address.Kind == topology.KindVhost {
			continue
		}
		switch c.Action {
		case plan.Create, plan.Replace:
			r.Owned[c.Address] = true
		case plan.Migrate:
			// The temporary queue is rmqtopo's while the migration runs,
			// and stays so if the apply stops before it finishes.
			r.Owned[c.Address] = true
			r.Owned[migrationQueue(c)] = true
		}
	}
	return out
}

// finalOf is the record after the apply: what was owned, plus what this
// apply created, minus what it deleted. Claims are those of the intent.
func finalOf(p plan.Plan, intent, had map[string]topology.Record, done []plan.Change) map[string]topology.Record {
	out := map[string]topology.Record{}
	for v, r := range had {
		next := r.Clone()
		next.Claims = intent[v].Claims
		out[v] = next
	}
	adoptRetired(p, out)
	for _, c := range done {
		r, ok := out[c.Address.Vhost]
		if !ok {
			continue
		}
		switch c.Action {
		case plan.Create, plan.Replace:
			if c.Address.Kind != topology.KindVhost {
				r.Owned[c.Address] = true
			}
		case plan.Delete:
			delete(r.Owned, c.Address)
		case plan.Migrate:
			r.Owned[c.Address] = true
			delete(r.Owned, migrationQueue(c))
		}
	}
	return out
}

// writeRecords writes each record of next that differs from prev's, as
// the generation after the newest written so far. Intent is written before
// anything is created: a record naming an object that was never created
// is harmless, while an object created but never recorded would be
// someone else's forever. The final records are written even after a
// failure or an interrupt, with a context of their own, so that the
// records stay true to what exists.
func writeRecords(ctx context.Context, t target.Target, next, prev map[string]topology.Record) error {
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
	}
	var first error
	for _, v := range slices.Sorted(maps.Keys(next)) {
		r := next[v]
		old := prev[v]
		if r.Generation <= old.Generation {
			r.Generation = old.Generation + 1
		}
		if sameRecord(r, old) {
			r.Generation = old.Generation
			next[v] = r
			continue
		}
		if err := t.PutRecord(ctx, r); err != nil && first == nil {
			first = err
			continue
		}
		next[v] = r
	}
	return first
}

// sameRecord reports whether two records say the same thing and their
// generation was written (a generation of 0 never was).
func sameRecord(a, b topology.Record) bool {
	if b.Generation == 0 || len(a.Claims) != len(b.Claims) || len(a.Owned) != len(b.Owned) {
		return false
	}
	for k, d := range a.Claims {
		if e, ok := b.Claims[k]; !ok || e != d {
			return false
		}
	}
	for k := range a.Owned {
		if !b.Owned[k] {
			return false
		}
	}
	return true
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

// adoptRetired records as owned, in the records of out, every queue the
// plan retires (plan.WhyRetired): a hand-made queue the spec adopted to
// retire becomes the spec's, as if rmqtopo had made it, so that a later
// plan of this spec deletes it once empty and no other spec's does. A
// retired queue this apply deletes is dropped again by finalOf's deletes.
func adoptRetired(p plan.Plan, out map[string]topology.Record) {
	for _, c := range p.Changes {
		if r, ok := out[c.Address.Vhost]; ok && c.Why() == plan.WhyRetired {
			r.Owned[c.Address] = true
		}
	}
}
