package broker_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/apply"
	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

// migrationSpec is a work queue fed through an exchange, of the given type.
func migrationSpec(typ string, migrate, dlq bool) string {
	return fmt.Sprintf(`version: 1
exchanges:
  - {name: shop, type: topic}
queues:
  - name: orders
    type: %s
    migrate: %t
    dlq: %t
    bindings: [{exchange: shop, routing_key: "order.*"}]
`, typ, migrate, dlq)
}

// publishIDs publishes messages with ids [from, to) to exchange with
// confirms, and returns the ids the broker confirmed.
func publishIDs(t *testing.T, conn *amqp.Connection, exchange, key string, from, to int) []int {
	t.Helper()
	ids, err := publishBatch(conn, exchange, key, from, to)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func publishBatch(conn *amqp.Connection, exchange, key string, from, to int) ([]int, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, err
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		return nil, err
	}
	type sent struct {
		id int
		dc *amqp.DeferredConfirmation
	}
	var all []sent
	for id := from; id < to; id++ {
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), exchange, key, true, false,
			amqp.Publishing{DeliveryMode: amqp.Persistent, MessageId: strconv.Itoa(id), Body: []byte("m")})
		if err != nil {
			return nil, err
		}
		all = append(all, sent{id, dc})
	}
	var ok []int
	for _, s := range all {
		if acked, err := s.dc.WaitContext(context.Background()); err == nil && acked {
			ok = append(ok, s.id)
		}
	}
	return ok, nil
}

// recorder counts deliveries by message id.
type recorder struct {
	mu   sync.Mutex
	seen map[int]int
}

func (r *recorder) add(id int) {
	r.mu.Lock()
	r.seen[id]++
	r.mu.Unlock()
}

// missing returns the ids of want never delivered, and the duplicates.
func (r *recorder) missing(want []int) (missing []int, dups int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range want {
		if r.seen[id] == 0 {
			missing = append(missing, id)
		}
	}
	for _, n := range r.seen {
		dups += max(0, n-1)
	}
	return missing, dups
}

// consume consumes queue with acks, as an application would, until ctx is
// done: when the broker cancels it (the queue is deleted by a migration)
// it consumes again as soon as the queue exists again.
func consume(ctx context.Context, conn *amqp.Connection, queue string, rec *recorder, slow time.Duration) {
	for ctx.Err() == nil {
		ch, err := conn.Channel()
		if err != nil {
			return
		}
		ch.Qos(50, 0, false)
		deliveries, err := ch.Consume(queue, "", false, false, false, false, nil)
		if err != nil {
			time.Sleep(10 * time.Millisecond) // the queue is being re-created
			continue
		}
		for open := true; open; {
			select {
			case d, ok := <-deliveries:
				if !ok {
					open = false
					break
				}
				id, _ := strconv.Atoi(d.MessageId)
				rec.add(id)
				time.Sleep(slow)
				d.Ack(false)
			case <-ctx.Done():
				open = false
			}
		}
		ch.Close()
	}
}

// TestMigrateUnderLoad migrates a classic queue holding 10,000 messages to
// a quorum queue while a publisher sends through its exchange and a
// consumer acks: every confirmed message is delivered at least once.
func TestMigrateUnderLoad(t *testing.T) {
	t.Parallel()
	l := newLive(t)
	classic := spec.Expand(parseFor(t, "classic.yaml", []byte(migrationSpec("classic", false, true)), l.vhost))
	l.converge(t, classic, false)

	conn := l.b.Dial(t, l.vhost)
	sent := publishIDs(t, conn, "shop", "order.new", 0, 10_000)

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	rec := &recorder{seen: map[int]int{}}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); consume(ctx, l.b.Dial(t, l.vhost), "orders", rec, 200*time.Microsecond) }()
	var (
		pubMu     sync.Mutex
		published []int
		pubErr    error
	)
	go func() {
		defer wg.Done()
		pc := l.b.Dial(t, l.vhost)
		for next := 10_000; ctx.Err() == nil; next += 100 {
			ids, err := publishBatch(pc, "shop", "order.new", next, next+100)
			pubMu.Lock()
			published = append(published, ids...)
			if err != nil && pubErr == nil {
				pubErr = err
			}
			pubMu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()

	files := []*spec.File{parseFor(t, "quorum.yaml", []byte(migrationSpec("quorum", true, true)), l.vhost)}
	quorum := spec.Expand(files...)
	p, st, err := plan.Make(context.Background(), l.c, quorum, plan.Choices{Specs: l.specs(), Migrate: plan.Migration{Queues: spec.Migrations(files...)}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"migrate queue orders", "migrate queue orders.dlq"}, sorted(queueChanges(p))); diff != "" {
		t.Fatalf("plan (-want +got):\n%s", diff)
	}
	var (
		steps             []string
		deleted, declared time.Time
		movedOut          int
	)
	l.s.MigrateHook = func(q, step string, moved int) {
		if q != "orders" {
			return
		}
		switch step {
		case broker.StepDelete:
			deleted, movedOut = time.Now(), moved
		case broker.StepDeclare:
			declared = time.Now()
		}
		if len(steps) == 0 || steps[len(steps)-1] != step {
			steps = append(steps, step)
		}
	}
	start := time.Now()
	if _, err := apply.Apply(context.Background(), l.s, p, apply.Options{Records: plan.OwnRecords(st, l.specs())}); err != nil {
		t.Fatalf("apply: %v", err)
	}
	t.Logf("migrated in %s: steps %v; %d messages moved out (the consumer took the rest); from the delete's answer to the declare's: %s",
		time.Since(start).Round(time.Millisecond), steps, movedOut, declared.Sub(deleted))
	if movedOut < 1000 {
		t.Errorf("the migration moved only %d messages out: the test does not exercise it", movedOut)
	}
	// A window, not a guard: the publisher goes on for a while after the
	// switch, so that messages published to the new queue count too. Its
	// length only sets how many; a slow machine publishes fewer, never
	// fails the test.
	time.Sleep(300 * time.Millisecond)
	stop()
	wg.Wait()
	if pubErr != nil {
		t.Fatalf("publisher: %v", pubErr)
	}
	all := append(sent, published...)
	drainInto(t, conn, "orders", rec, len(all))
	missing, dups := rec.missing(all)
	t.Logf("%d messages confirmed (%d during the migration), %d duplicates", len(all), len(published), dups)
	if len(missing) > 0 {
		// Tell a drain cut short by its guard from a loss.
		t.Fatalf("%d messages lost, e.g. %v (%d messages still in orders after the drain)",
			len(missing), missing[:min(10, len(missing))], l.b.QueueDepth(t, l.vhost, "orders"))
	}
	checkMigrated(t, l, quorum)
}

// drainInto consumes what is left in queue into rec, until rec has seen
// want messages; the caller then finds any missing.
func drainInto(t *testing.T, conn *amqp.Connection, queue string, rec *recorder, want int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { consume(ctx, conn, queue, rec, 0); close(done) }()
	// A hang guard: what is left (up to about 10,000 persistent messages)
	// drains in about 3 s alone, and took 14 s with the package's other
	// tests running on a busy machine; 10 s covers the latter.
	deadline := waitguard.Deadline(10 * time.Second)
	for time.Now().Before(deadline) {
		rec.mu.Lock()
		n := len(rec.seen)
		rec.mu.Unlock()
		if n >= want {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-done
}

// checkMigrated checks that the migration left nothing behind: an empty
// plan, no temporary queue, the ownership record without it.
func checkMigrated(t *testing.T, l *live, desired topology.Topology) {
	t.Helper()
	again, st := l.plan(t, desired, true)
	if diff := cmp.Diff([]string(nil), changes(again)); diff != "" {
		t.Errorf("plan after the migration (-want +got):\n%s", diff)
	}
	temp := queueAddr(l.vhost, contract.MigrationQueue("orders"))
	if st.Owned[temp] {
		t.Errorf("the ownership record still names %s", temp)
	}
	for _, q := range st.Topology.Queues {
		if _, ok := contract.ParseMigrationQueue(q.Name); ok {
			t.Errorf("temporary queue %q is left", q.Name)
		}
	}
	ch, err := l.b.Dial(t, l.vhost).Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	_, err = ch.QueueDeclarePassive(contract.MigrationQueue("orders"), false, false, false, false, nil)
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Code != amqp.NotFound {
		t.Errorf("passive declare of the temporary queue: %v, want not found", err)
	}
}

// TestMigrateResumesFromEachStep stops a migration after each step (an
// interrupted context, as close as a test process gets to kill -9 in
// process; cmd/rmqtopo kills a real process) and checks that a new plan
// resumes it and loses nothing.
func TestMigrateResumesFromEachStep(t *testing.T) {
	t.Parallel()
	for _, step := range []string{broker.StepTemp, broker.StepBindTemp, broker.StepMoveOut, broker.StepDelete,
		broker.StepDeclare, broker.StepRebind, broker.StepMoveBack} {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			l := newLive(t)
			l.converge(t, spec.Expand(parseFor(t, "classic.yaml", []byte(migrationSpec("classic", false, false)), l.vhost)), false)
			conn := l.b.Dial(t, l.vhost)
			sent := publishIDs(t, conn, "shop", "order.new", 0, 3000)
			quorum := spec.Expand(parseFor(t, "quorum.yaml", []byte(migrationSpec("quorum", false, false)), l.vhost))
			p, st, err := plan.Make(context.Background(), l.c, quorum, plan.Choices{Specs: l.specs(), Migrate: plan.Migration{All: true}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			l.s.MigrateHook = func(q, s string, moved int) {
				if q == "orders" && s == step && (moved == 0 || moved >= 1000) {
					cancel()
				}
			}
			_, err = apply.Apply(ctx, l.s, p, apply.Options{Records: plan.OwnRecords(st, l.specs())})
			t.Logf("interrupted after %s: %v", step, err)
			l.s.MigrateHook = nil

			p, st = l.plan(t, quorum, false)
			if diff := cmp.Diff([]string{"migrate queue orders"}, queueChanges(p)); diff != "" {
				t.Fatalf("plan after the interruption (-want +got):\n%s", diff)
			}
			if _, err := apply.Apply(context.Background(), l.s, p, apply.Options{Records: plan.OwnRecords(st, l.specs())}); err != nil {
				t.Fatalf("resume: %v", err)
			}
			rec := &recorder{seen: map[int]int{}}
			drainInto(t, conn, "orders", rec, len(sent))
			if missing, _ := rec.missing(sent); len(missing) > 0 {
				t.Fatalf("%d messages lost, e.g. %v", len(missing), missing[:min(10, len(missing))])
			}
			checkMigrated(t, l, quorum)
		})
	}
}

// TestMigrateQuorumToClassic migrates the other way, from a queue that
// refuses if-empty, chosen by migrate: true in the spec.
func TestMigrateQuorumToClassic(t *testing.T) {
	t.Parallel()
	l := newLive(t)
	l.converge(t, spec.Expand(parseFor(t, "quorum.yaml", []byte(migrationSpec("quorum", false, false)), l.vhost)), false)
	conn := l.b.Dial(t, l.vhost)
	sent := publishIDs(t, conn, "shop", "order.new", 0, 2000)

	files := []*spec.File{parseFor(t, "classic.yaml", []byte(migrationSpec("classic", true, false)), l.vhost)}
	classic := spec.Expand(files...)
	p, st, err := plan.Make(context.Background(), l.c, classic, plan.Choices{Specs: l.specs(), Migrate: plan.Migration{Queues: spec.Migrations(files...)}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"migrate queue orders"}, queueChanges(p)); diff != "" {
		t.Fatalf("plan (-want +got):\n%s", diff)
	}
	if _, err := apply.Apply(context.Background(), l.s, p, apply.Options{Records: plan.OwnRecords(st, l.specs())}); err != nil {
		t.Fatalf("apply: %v", err)
	}
	rec := &recorder{seen: map[int]int{}}
	drainInto(t, conn, "orders", rec, len(sent))
	if missing, _ := rec.missing(sent); len(missing) > 0 {
		t.Fatalf("%d messages lost, e.g. %v", len(missing), missing[:min(10, len(missing))])
	}
	checkMigrated(t, l, classic)
}

// queueChanges lists the changes of p's queues, which are what a
// migration is about (a plan may also update policies or bindings).
func queueChanges(p plan.Plan) []string {
	var out []string
	for _, c := range p.Changes {
		if c.Action != plan.NoOp && c.Address.Kind == topology.KindQueue {
			out = append(out, describe(c.Action, c.Address))
		}
	}
	return out
}
