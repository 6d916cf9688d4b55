package status_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/rmqtopo/rmqtopo/internal/golden"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/status"
)

// The status reports are written by hand, as Build would build them, so
// that the goldens show the views alone: what status reads and
// counts is Read's tests'.

// statusDrift has two work queues, one drifted: a shared wait queue, a
// replaced one, a DLQ holding messages, a missing parking lot, a work
// queue without consumers, and drift of objects other than queues.
func statusDrift() status.Report {
	return status.Report{
		FormatVersion: status.FormatVersion,
		DriftChecked:  true,
		Queues: []status.WorkQueueStatus{
			{Vhost: "shop", File: "shop.yaml", Queue: "orders.created", Queues: []status.QueueStatus{
				{Name: "orders.created", Role: status.RoleWork, Present: true, Messages: 4, Ready: 3, Unacked: 1, Consumers: 2, PublishRate: 1.5, DeliverRate: 1.25},
				{Name: "rmqtopo.wait.5s", Role: status.RoleWait, Delay: "5s", Retries: []int{2, 3}, Shared: true, Present: true, Messages: 7, Ready: 7},
				{Name: "rmqtopo.wait.1m", Role: status.RoleWait, Delay: "1m", Retries: []int{4}, Present: true, Messages: 1, Ready: 1,
					Flags: []string{status.FlagDrift}, Drift: []string{"replace: queue argument x-message-ttl is immutable (1000 → 60000)"}},
				{Name: "orders.created.dlq", Role: status.RoleDLQ, Present: true, Messages: 2, Ready: 2, Flags: []string{status.FlagDLQNotEmpty}},
			}},
			{Vhost: "shop", File: "shop.yaml", Queue: "orders.paid", Queues: []status.QueueStatus{
				{Name: "orders.paid", Role: status.RoleWork, Present: true, Flags: []string{status.FlagNoConsumers}},
				{Name: "rmqtopo.wait.5s", Role: status.RoleWait, Delay: "5s", Retries: []int{1}, Shared: true, Present: true, Messages: 7, Ready: 7},
				{Name: "orders.paid.dlq", Role: status.RoleDLQ, Present: true},
				{Name: "orders.paid.parking-lot", Role: status.RoleParkingLot,
					Flags: []string{status.FlagMissing, status.FlagDrift}, Drift: []string{"create"}},
			}},
		},
		Drift: []status.DriftItem{
			{Action: plan.Create, Address: `binding "orders -> orders.paid" (vhost shop)`},
			{Action: plan.Update, Address: `policy "cap" (vhost shop)`, Reason: "max-length 10 → 20"},
		},
		Summary: status.Summary{DLQsNotEmpty: 1, DLQMessages: 2, WithoutConsumers: 1, MissingQueues: 1, DriftedObjects: 4, MessagesInRetries: 8},
	}
}

// statusHeld has a wait queue holding dead-letters and one stuck after the
// held margin, a served and an unserved return queue, a migration in
// progress, and no drift check.
func statusHeld() status.Report {
	return status.Report{
		FormatVersion: status.FormatVersion,
		Queues: []status.WorkQueueStatus{
			{Vhost: "v", File: "held.yaml", Queue: "a", Queues: []status.QueueStatus{
				{Name: "a", Role: status.RoleWork, Present: true, Consumers: 1, DeliverRate: 0.04},
				{Name: "rmqtopo.wait.1s", Role: status.RoleWait, Delay: "1s", Retries: []int{1}, Present: true, Messages: 1200, Ready: 10, Unacked: 2,
					Held: 1188, Stuck: 1190, Flags: []string{status.FlagHeld, status.FlagStuck}},
				{Name: "rmqtopo.wait.1m", Role: status.RoleWait, Delay: "1m", Retries: []int{2}, Present: true, Messages: 3, Held: 3,
					Flags: []string{status.FlagHeld}},
				{Name: "a.return", Role: status.RoleReturn, Present: true, Messages: 7, Ready: 7, Flags: []string{status.FlagReturnNotServed}},
				{Name: "a.dlq", Role: status.RoleDLQ, Present: true},
			}},
			{Vhost: "v", File: "held.yaml", Queue: "b", Queues: []status.QueueStatus{
				{Name: "b", Role: status.RoleWork, Present: true, Messages: 40, Ready: 40, Consumers: 3, PublishRate: 12.345, DeliverRate: 12},
				{Name: "b.rmqtopo-migrate", Role: status.RoleMigration, Present: true, Messages: 5, Ready: 5, Flags: []string{status.FlagMigrating}},
				{Name: "b.return", Role: status.RoleReturn, Present: true, Messages: 1, Ready: 1, Consumers: 1},
				{Name: "b.dlq", Role: status.RoleDLQ, Present: true, Messages: 1, Ready: 1, Flags: []string{status.FlagDLQNotEmpty}},
			}},
		},
		HeldMargin: "30s",
		Summary: status.Summary{DLQsNotEmpty: 1, DLQMessages: 1, MessagesInRetries: 1203, Migrations: 1,
			DeadLettersHeld: 1191, WaitQueuesStuck: 1, DeadLettersStuck: 1190, RetriesWaiting: 8},
	}
}

// statusLevels has a queue of the levels layout, whose rows are the
// ladder's levels with no retry numbers, and retired wait queues still
// draining in two vhosts: a shared one and a level of a retired ladder.
func statusLevels() status.Report {
	level := func(k int) *int { return &k }
	return status.Report{
		FormatVersion: status.FormatVersion,
		DriftChecked:  true,
		Queues: []status.WorkQueueStatus{
			{Vhost: "v", File: "levels.yaml", Queue: "email.send", Queues: []status.QueueStatus{
				{Name: "email.send", Role: status.RoleWork, Present: true, Consumers: 1},
				{Name: "rmqtopo.levels.100ms.10.q9.51200ms", Role: status.RoleWait, Delay: "51200ms", Level: level(9), DueWithin: "1m42.3s", Shared: true, Present: true, Messages: 2, Ready: 2},
				{Name: "rmqtopo.levels.100ms.10.q0.100ms", Role: status.RoleWait, Delay: "100ms", Level: level(0), DueWithin: "100ms", Shared: true, Present: true},
				{Name: "email.send.dlq", Role: status.RoleDLQ, Present: true},
			}},
		},
		Draining: []status.DrainingQueue{
			{Vhost: "v", QueueStatus: status.QueueStatus{Name: "rmqtopo.wait.30s", Role: status.RoleWait, Delay: "30s", Present: true, Messages: 3, Ready: 3,
				Flags: []string{status.FlagDraining}}},
			{Vhost: "w", QueueStatus: status.QueueStatus{Name: "rmqtopo.levels.1s.6.q5.32s", Role: status.RoleWait, Delay: "32s", Level: level(5), DueWithin: "1m3s",
				Present: true, Messages: 1, Ready: 1, Flags: []string{status.FlagDraining}}},
		},
		Summary: status.Summary{MessagesInRetries: 2, RetiredDraining: 2, RetiredMessages: 4},
	}
}

// statusDelayed is read from RabbitMQ 4.3: its quorum queues count the
// messages their delayed retry holds back (a work queue with retries
// waiting inside it), its classic queue does not, and one queue is
// missing.
func statusDelayed() status.Report {
	n := func(v int64) *int64 { return &v }
	return status.Report{
		FormatVersion: status.FormatVersion,
		DriftChecked:  true,
		Queues: []status.WorkQueueStatus{
			{Vhost: "v", File: "native.yaml", Queue: "orders", Queues: []status.QueueStatus{
				{Name: "orders", Role: status.RoleWork, Present: true, Messages: 7, Ready: 3, Unacked: 1, Delayed: n(3), Consumers: 1},
				{Name: "orders.dlq", Role: status.RoleDLQ, Present: true, Delayed: n(0)},
			}},
			{Vhost: "v", File: "native.yaml", Queue: "audit", Queues: []status.QueueStatus{
				{Name: "audit", Role: status.RoleWork, Present: true, Consumers: 1},
				{Name: "audit.dlq", Role: status.RoleDLQ, Flags: []string{status.FlagMissing, status.FlagDrift}, Drift: []string{"create"}},
			}},
		},
		Summary: status.Summary{MissingQueues: 1, DriftedObjects: 1, RetriesDelayed: 3},
	}
}

// statusEmpty is a spec without queues, its drift checked: there is none.
func statusEmpty() status.Report {
	return status.Report{FormatVersion: status.FormatVersion, DriftChecked: true}
}

// TestStatusGolden: the status views as text, coloured text and JSON.
func TestStatusGolden(t *testing.T) {
	for name, st := range map[string]status.Report{
		"drift":   statusDrift(),
		"held":    statusHeld(),
		"empty":   statusEmpty(),
		"levels":  statusLevels(),
		"delayed": statusDelayed(),
	} {
		t.Run(name, func(t *testing.T) {
			var text, color, js bytes.Buffer
			if err := status.Text(&text, st, false); err != nil {
				t.Fatal(err)
			}
			if err := status.Text(&color, st, true); err != nil {
				t.Fatal(err)
			}
			if err := status.JSON(&js, st); err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(text.Bytes(), []byte("\x1b[")) {
				t.Error("text without colour has escape codes")
			}
			dir := filepath.Join("testdata", "view")
			golden.Assert(t, filepath.Join(dir, name+".txt.golden"), text.Bytes())
			golden.Assert(t, filepath.Join(dir, name+".color.golden"), color.Bytes())
			golden.Assert(t, filepath.Join(dir, name+".json.golden"), js.Bytes())
		})
	}
}
