package apply_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/apply"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

// migrator is the fake with migrations.
type migrator struct {
	*fake
	err error
}

func (m *migrator) MigrateQueue(ctx context.Context, after topology.Queue) error {
	if err := m.call(ctx, "migrate-queue "+after.Name); err != nil {
		return err
	}
	return m.err
}

func migrate(o topology.Queue) plan.Change { return change(plan.Migrate, o, o) }

func TestApplyMigrate(t *testing.T) {
	for _, tt := range []struct {
		name      string
		err       error
		wantFinal string
	}{
		{"done", nil, "put-owned v [queue:orders]"},
		{"stopped", errors.New("connection lost"), "put-owned v [queue:orders.rmqtopo-migrate]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := &migrator{fake: &fake{}, err: tt.err}
			p := plan.Plan{Changes: []plan.Change{migrate(qu("orders"))}}
			res, err := apply.Apply(context.Background(), m, p, apply.Options{Records: records()})
			if (err != nil) != (tt.err != nil) {
				t.Fatalf("Apply: %v", err)
			}
			// Intent names both queues before the migration starts; the
			// final record keeps the temporary queue until it is gone.
			want := []string{"put-owned v [queue:orders queue:orders.rmqtopo-migrate]", "migrate-queue orders", tt.wantFinal}
			if diff := cmp.Diff(want, m.calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if tt.err == nil && (res.Migrated != 1 || res.Changes() != 1) {
				t.Errorf("result %+v", res)
			}
		})
	}
}

func TestApplyForgetsFinishedMigrations(t *testing.T) {
	f := &fake{}
	stale := qu("orders.rmqtopo-migrate").Addr()
	p := plan.Plan{Changes: []plan.Change{noop(qu("orders")), create(qu("other"))}}
	if _, err := apply.Apply(context.Background(), f, p, apply.Options{Records: records(stale, qu("orders").Addr())}); err != nil {
		t.Fatal(err)
	}
	want := []string{"put-owned v [queue:orders queue:other]", "declare-queue other"}
	if diff := cmp.Diff(want, f.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestApplyMigrateNeedsAMigrator(t *testing.T) {
	_, err := apply.Apply(context.Background(), &fake{}, plan.Plan{Changes: []plan.Change{migrate(qu("orders"))}}, apply.Options{Records: records()})
	if err == nil || !strings.Contains(err.Error(), `migrate queue "orders" in vhost "v": this target cannot migrate queues`) {
		t.Errorf("Apply = %v", err)
	}
}

// drainer is the migrator that can wait for queues to drain.
type drainer struct {
	*migrator
	err error
}

func (d *drainer) WaitDrained(ctx context.Context, vhost, into string, names []string) error {
	if err := d.call(ctx, "wait-drained "+into+" "+strings.Join(names, ",")); err != nil {
		return err
	}
	return d.err
}

// TestApplyMigrateWaitsForRetired: a migration whose queue retired queues
// dead-letter into by name first waits for them to drain; when they do
// not, the queue is not migrated, and a target that cannot wait refuses.
func TestApplyMigrateWaitsForRetired(t *testing.T) {
	c := migrate(qu("work"))
	c.EditDetails().WaitFor = []string{"work.retry"}
	p := plan.Plan{Changes: []plan.Change{c}}
	d := &drainer{migrator: &migrator{fake: &fake{}}}
	if _, err := apply.Apply(context.Background(), d, p, apply.Options{Records: records()}); err != nil {
		t.Fatal(err)
	}
	want := []string{"put-owned v [queue:work queue:work.rmqtopo-migrate]", "wait-drained work work.retry", "migrate-queue work", "put-owned v [queue:work]"}
	if diff := cmp.Diff(want, d.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	d = &drainer{migrator: &migrator{fake: &fake{}}, err: errNotEmpty}
	if _, err := apply.Apply(context.Background(), d, p, apply.Options{Records: records()}); err == nil || slices.Contains(d.calls, "migrate-queue work") {
		t.Errorf("a retired queue that did not drain: err %v, calls %q", err, d.calls)
	}
	m := &migrator{fake: &fake{}}
	if _, err := apply.Apply(context.Background(), m, p, apply.Options{Records: records()}); err == nil || slices.Contains(m.calls, "migrate-queue work") {
		t.Errorf("a target that cannot wait: err %v, calls %q", err, m.calls)
	}
}
