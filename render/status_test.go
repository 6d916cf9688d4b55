package render_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/rmqtopo/rmqtopo/internal/statusdata"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/render"
)

// The status reports are written by hand, as internal/status would build
// them, so that the goldens show the views alone: what status reads and
// counts is internal/status's to test.

// statusDrift has two work queues, one drifted: a shared wait queue, a
// replaced one, a DLQ holding messages, a missing parking lot, a work
// queue without consumers, and drift of objects other than queues.
func statusDrift() statusdata.Report {
	return statusdata.Report{
		FormatVersion: statusdata.FormatVersion,
		DriftChecked:  true,
		Queues: []statusdata.WorkQueueStatus{
			{Vhost: "shop", File: "shop.yaml", Queue: "orders.created", Queues: []statusdata.QueueStatus{
				{Name: "orders.created", Role: statusdata.RoleWork, Present: true, Messages: 4, Ready: 3, Unacked: 1, Consumers: 2, PublishRate: 1.5, DeliverRate: 1.25},
				{Name: "rmqtopo.wait.5s", Role: statusdata.RoleWait, Delay: "5s", Retries: []int{2, 3}, Shared: true, Present: true, Messages: 7, Ready: 7},
				{Name: "rmqtopo.wait.1m", Role: statusdata.RoleWait, Delay: "1m", Retries: []int{4}, Present: true, Messages: 1, Ready: 1,
					Flags: []string{statusdata.FlagDrift}, Drift: []string{"replace: queue argument x-message-ttl is immutable (1000 → 60000)"}},
				{Name: "orders.created.dlq", Role: statusdata.RoleDLQ, Present: true, Messages: 2, Ready: 2, Flags: []string{statusdata.FlagDLQNotEmpty}},
			}},
			{Vhost: "shop", File: "shop.yaml", Queue: "orders.paid", Queues: []statusdata.QueueStatus{
				{Name: "orders.paid", Role: statusdata.RoleWork, Present: true, Flags: []string{statusdata.FlagNoConsumers}},
				{Name: "rmqtopo.wait.5s", Role: statusdata.RoleWait, Delay: "5s", Retries: []int{1}, Shared: true, Present: true, Messages: 7, Ready: 7},
				{Name: "orders.paid.dlq", Role: statusdata.RoleDLQ, Present: true},
				{Name: "orders.paid.parking-lot", Role: statusdata.RoleParkingLot,
					Flags: []string{statusdata.FlagMissing, statusdata.FlagDrift}, Drift: []string{"create"}},
			}},
		},
		Drift: []statusdata.DriftItem{
			{Action: plan.Create, Address: `binding "orders -> orders.paid" (vhost shop)`},
			{Action: plan.Update, Address: `policy "cap" (vhost shop)`, Reason: "max-length 10 → 20"},
		},
		Summary: statusdata.Summary{DLQsNotEmpty: 1, DLQMessages: 2, WithoutConsumers: 1, MissingQueues: 1, DriftedObjects: 4, MessagesInRetries: 8},
	}
}

// statusHeld has a wait queue holding dead-letters and one stuck after the
// held margin, a served and an unserved return queue, a migration in
// progress, and no drift check.
func statusHeld() statusdata.Report {
	return statusdata.Report{
		FormatVersion: statusdata.FormatVersion,
		Queues: []statusdata.WorkQueueStatus{
			{Vhost: "v", File: "held.yaml", Queue: "a", Queues: []statusdata.QueueStatus{
				{Name: "a", Role: statusdata.RoleWork, Present: true, Consumers: 1, DeliverRate: 0.04},
				{Name: "rmqtopo.wait.1s", Role: statusdata.RoleWait, Delay: "1s", Retries: []int{1}, Present: true, Messages: 1200, Ready: 10, Unacked: 2,
					Held: 1188, Stuck: 1190, Flags: []string{statusdata.FlagHeld, statusdata.FlagStuck}},
				{Name: "rmqtopo.wait.1m", Role: statusdata.RoleWait, Delay: "1m", Retries: []int{2}, Present: true, Messages: 3, Held: 3,
					Flags: []string{statusdata.FlagHeld}},
				{Name: "a.return", Role: statusdata.RoleReturn, Present: true, Messages: 7, Ready: 7, Flags: []string{statusdata.FlagReturnNotServed}},
				{Name: "a.dlq", Role: statusdata.RoleDLQ, Present: true},
			}},
			{Vhost: "v", File: "held.yaml", Queue: "b", Queues: []statusdata.QueueStatus{
				{Name: "b", Role: statusdata.RoleWork, Present: true, Messages: 40, Ready: 40, Consumers: 3, PublishRate: 12.345, DeliverRate: 12},
				{Name: "b.rmqtopo-migrate", Role: statusdata.RoleMigration, Present: true, Messages: 5, Ready: 5, Flags: []string{statusdata.FlagMigrating}},
				{Name: "b.return", Role: statusdata.RoleReturn, Present: true, Messages: 1, Ready: 1, Consumers: 1},
				{Name: "b.dlq", Role: statusdata.RoleDLQ, Present: true, Messages: 1, Ready: 1, Flags: []string{statusdata.FlagDLQNotEmpty}},
			}},
		},
		HeldMargin: "30s",
		Summary: statusdata.Summary{DLQsNotEmpty: 1, DLQMessages: 1, MessagesInRetries: 1203, Migrations: 1,
			DeadLettersHeld: 1191, WaitQueuesStuck: 1, DeadLettersStuck: 1190, RetriesWaiting: 8},
	}
}

// statusLevels has a queue of the levels layout, whose rows are the
// ladder's levels with no retry numbers, and retired wait queues still
// draining in two vhosts: a shared one and a level of a retired ladder.
func statusLevels() statusdata.Report {
	level := func(k int) *int { return &k }
	return statusdata.Report{
		FormatVersion: statusdata.FormatVersion,
		DriftChecked:  true,
		Queues: []statusdata.WorkQueueStatus{
			{Vhost: "v", File: "levels.yaml", Queue: "email.send", Queues: []statusdata.QueueStatus{
				{Name: "email.send", Role: statusdata.RoleWork, Present: true, Consumers: 1},
				{Name: "rmqtopo.levels.100ms.10.q9.51200ms", Role: statusdata.RoleWait, Delay: "51200ms", Level: level(9), DueWithin: "1m42.3s", Shared: true, Present: true, Messages: 2, Ready: 2},
				{Name: "rmqtopo.levels.100ms.10.q0.100ms", Role: statusdata.RoleWait, Delay: "100ms", Level: level(0), DueWithin: "100ms", Shared: true, Present: true},
				{Name: "email.send.dlq", Role: statusdata.RoleDLQ, Present: true},
			}},
		},
		Draining: []statusdata.DrainingQueue{
			{Vhost: "v", QueueStatus: statusdata.QueueStatus{Name: "rmqtopo.wait.30s", Role: statusdata.RoleWait, Delay: "30s", Present: true, Messages: 3, Ready: 3,
				Flags: []string{statusdata.FlagDraining}}},
			{Vhost: "w", QueueStatus: statusdata.QueueStatus{Name: "rmqtopo.levels.1s.6.q5.32s", Role: statusdata.RoleWait, Delay: "32s", Level: level(5), DueWithin: "1m3s",
				Present: true, Messages: 1, Ready: 1, Flags: []string{statusdata.FlagDraining}}},
		},
		Summary: statusdata.Summary{MessagesInRetries: 2, RetiredDraining: 2, RetiredMessages: 4},
	}
}

// statusDelayed is read from RabbitMQ 4.3: its quorum queues count the
// messages their delayed retry holds back (a work queue with retries
// waiting inside it), its classic queue does not, and one queue is
// missing.
func statusDelayed() statusdata.Report {
	n := func(v int64) *int64 { return &v }
	return statusdata.Report{
		FormatVersion: statusdata.FormatVersion,
		DriftChecked:  true,
		Queues: []statusdata.WorkQueueStatus{
			{Vhost: "v", File: "native.yaml", Queue: "orders", Queues: []statusdata.QueueStatus{
				{Name: "orders", Role: statusdata.RoleWork, Present: true, Messages: 7, Ready: 3, Unacked: 1, Delayed: n(3), Consumers: 1},
				{Name: "orders.dlq", Role: statusdata.RoleDLQ, Present: true, Delayed: n(0)},
			}},
			{Vhost: "v", File: "native.yaml", Queue: "audit", Queues: []statusdata.QueueStatus{
				{Name: "audit", Role: statusdata.RoleWork, Present: true, Consumers: 1},
				{Name: "audit.dlq", Role: statusdata.RoleDLQ, Flags: []string{statusdata.FlagMissing, statusdata.FlagDrift}, Drift: []string{"create"}},
			}},
		},
		Summary: statusdata.Summary{MissingQueues: 1, DriftedObjects: 1, RetriesDelayed: 3},
	}
}

// statusEmpty is a spec without queues, its drift checked: there is none.
func statusEmpty() statusdata.Report {
	return statusdata.Report{FormatVersion: statusdata.FormatVersion, DriftChecked: true}
}

// TestStatusGolden: the status views as text, coloured text and JSON.
func TestStatusGolden(t *testing.T) {
	for name, st := range map[string]statusdata.Report{
		"drift":   statusDrift(),
		"held":    statusHeld(),
		"empty":   statusEmpty(),
		"levels":  statusLevels(),
		"delayed": statusDelayed(),
	} {
		t.Run(name, func(t *testing.T) {
			var text, color, js bytes.Buffer
			if err := render.StatusText(&text, st, false); err != nil {
				t.Fatal(err)
			}
			if err := render.StatusText(&color, st, true); err != nil {
				t.Fatal(err)
			}
			if err := render.StatusJSON(&js, st); err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(text.Bytes(), []byte("\x1b[")) {
				t.Error("text without colour has escape codes")
			}
			dir := filepath.Join("testdata", "status")
			assertGolden(t, filepath.Join(dir, name+".txt.golden"), text.Bytes())
			assertGolden(t, filepath.Join(dir, name+".color.golden"), color.Bytes())
			assertGolden(t, filepath.Join(dir, name+".json.golden"), js.Bytes())
		})
	}
}
