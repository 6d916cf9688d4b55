package plan_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

// quorumOrders is orders moved to a quorum queue: a type change, which no
// policy can make.
var quorumOrders = queue("orders", topology.Args{"x-dead-letter-exchange": "orders.dlx", "x-message-ttl": int64(60000),
	"x-queue-type": "quorum"})

// migrating is live with orders' migration in progress: its temporary
// queue exists, bound like orders.
func migrating(live topology.Topology, withOrders *topology.Queue) topology.Topology {
	temp := queue(contract.MigrationQueue("orders"), topology.Args{"x-queue-type": "quorum"})
	return func() topology.Topology {
		t := live
		t.Queues = nil
		for _, q := range live.Queues {
			if q.Name != "orders" {
				t.Queues = append(t.Queues, q)
			}
		}
		if withOrders != nil {
			t.Queues = append(t.Queues, *withOrders)
		}
		t.Queues = append(t.Queues, temp)
		t.Bindings = nil
		for _, b := range live.Bindings {
			if b.Destination != "orders" || withOrders != nil {
				t.Bindings = append(t.Bindings, b)
			}
		}
		t.Bindings = append(t.Bindings, bindQueue("shop", temp.Name, "order.*", nil))
		t.Sort()
		return t
	}()
}

func TestDiffMigrate(t *testing.T) {
	desired := with(func(t *topology.Topology) { replaceQueue(t, quorumOrders) })
	ordersAddr, tempAddr := orders.Addr(), queue(contract.MigrationQueue("orders"), nil).Addr()
	counts := map[topology.Address]int64{ordersAddr: 10, tempAddr: 32}
	const why = `queue type is immutable (classic → quorum)`
	tests := []struct {
		name    string
		live    topology.Topology
		migrate plan.Migration
		want    []string
	}{{
		name: "replace without a choice",
		live: small(),
		want: []string{`replace queue "orders" in vhost "/" # ` + why + ` [messages=10]`,
			`create binding "shop -> orders" [queue key="order.*"] in vhost "/" # re-created after replace of queue "orders"`},
	}, {
		name:    "migrate with --migrate: bindings stay",
		live:    small(),
		migrate: plan.Migration{All: true},
		want: []string{`migrate queue "orders" in vhost "/" # ` + why +
			`; migrated: its messages are moved out and back with confirms [messages=10]`},
	}, {
		name:    "migrate chosen for the queue",
		live:    small(),
		migrate: plan.Migration{Queues: map[topology.Address]bool{ordersAddr: true}},
		want: []string{`migrate queue "orders" in vhost "/" # ` + why +
			`; migrated: its messages are moved out and back with confirms [messages=10]`},
	}, {
		name: "resumed before the delete, without a choice",
		live: migrating(small(), &orders),
		want: []string{`migrate queue "orders" in vhost "/" # ` + why +
			`; resumes the migration in progress through queue "orders.rmqtopo-migrate" [messages=42]`},
	}, {
		name: "resumed between delete and re-declare",
		live: migrating(small(), nil),
		want: []string{`migrate queue "orders" in vhost "/" # resumes the migration in progress through queue "orders.rmqtopo-migrate" [messages=32]`},
	}, {
		name: "resumed after the re-declare",
		live: migrating(small(), &quorumOrders),
		want: []string{`migrate queue "orders" in vhost "/" # resumes the migration in progress through queue "orders.rmqtopo-migrate" [messages=42]`},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := owned(tt.live)
			n := map[topology.Address]int64{}
			for _, q := range tt.live.Queues {
				if c, ok := counts[q.Addr()]; ok {
					n[q.Addr()] = c
				}
			}
			p := plan.DiffTopology(tt.live, desired, plan.Options{Prune: true, Owned: o, Messages: n, Migrate: tt.migrate})
			if diff := cmp.Diff(tt.want, rows(p, false)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if b := plan.Blocking(plan.Check(p, plan.CheckOptions{})); len(b) > 0 && tt.migrate.All {
				t.Errorf("a migration blocks: %v", b)
			}
		})
	}
}

func TestDiffMigrateNotAStream(t *testing.T) {
	stream := queue("orders", topology.Args{"x-queue-type": "stream"})
	desired := with(func(t *topology.Topology) { replaceQueue(t, stream) })
	p := plan.DiffTopology(small(), desired, plan.Options{Migrate: plan.Migration{All: true}})
	got := rows(p, false)
	const prefix = `replace queue "orders" in vhost "/" # queue type is immutable (classic → stream); `
	const suffix = `; migration moves messages of classic and quorum queues only, not of a stream queue`
	if len(got) == 0 || !strings.HasPrefix(got[0], prefix) || !strings.HasSuffix(got[0], suffix) {
		t.Errorf("first change = %q, want a replace that says why it cannot migrate", got)
	}
}

func TestDiffMigrationOrphaned(t *testing.T) {
	live := migrating(small(), nil)
	p := plan.DiffTopology(live, small2(), plan.Options{Prune: true, Owned: owned(live)})
	ds := plan.Check(p, plan.CheckOptions{})
	var codes []string
	for _, d := range ds {
		codes = append(codes, d.Code)
	}
	if diff := cmp.Diff([]string{plan.CodeMigrationOrphaned}, codes); diff != "" {
		t.Errorf("diagnostics (-want +got):\n%s\n%v", diff, ds)
	}
	for _, c := range p.Changes {
		if c.Address.Name == contract.MigrationQueue("orders") && c.Action != plan.NoOp {
			t.Errorf("the temporary queue is planned: %s", c.Action)
		}
	}
}

// small2 is small without orders and its binding.
func small2() topology.Topology {
	return with(func(t *topology.Topology) {
		var qs []topology.Queue
		for _, q := range t.Queues {
			if q.Name != "orders" {
				qs = append(qs, q)
			}
		}
		var bs []topology.Binding
		for _, b := range t.Bindings {
			if b.Destination != "orders" {
				bs = append(bs, b)
			}
		}
		t.Queues, t.Bindings = qs, bs
	})
}

func TestCheckMigrate(t *testing.T) {
	n := int64(7)
	p := plan.Plan{Changes: []plan.Change{{Action: plan.Migrate, Address: orders.Addr(), Details: &plan.Details{Messages: &n}}}}
	ds := plan.Check(p, plan.CheckOptions{})
	want := `migrating queue "orders" in vhost "/" moves 7 messages through queue "orders.rmqtopo-migrate" and back, with confirms; ` +
		`publishes to "orders" through the default exchange are unroutable between its delete and re-declare, ` +
		`and its consumers are cancelled by the delete and must consume again`
	if len(ds) != 1 || ds[0].Code != plan.CodeMigrateQueue || ds[0].Severity != plan.SeverityInfo || ds[0].Message != want {
		t.Errorf("Check = %+v", ds)
	}
	if s := p.CountActions(); s.Migrate != 1 {
		t.Errorf("CountActions().Migrate = %d, want 1", s.Migrate)
	}
}

func TestDiffMigrateNotAutoDelete(t *testing.T) {
	auto := orders
	auto.AutoDelete = true
	live := with(func(t *topology.Topology) { replaceQueue(t, auto) })
	p := plan.DiffTopology(live, small(), plan.Options{Migrate: plan.Migration{All: true}})
	got := rows(p, false)
	if len(got) == 0 || !strings.HasPrefix(got[0], `replace queue "orders"`) || !strings.Contains(got[0], "an auto-delete queue cannot be migrated") {
		t.Errorf("first change = %q, want a replace that says why it cannot migrate", got)
	}
}
