package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/internal/failpoint"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
)

const migrateClassic = `name: orders
exchanges:
  - {name: shop, type: topic}
queues:
  - name: orders
    dlq: false
    bindings: [{exchange: shop, routing_key: "order.*"}]
`

// migrateQuorum is migrateClassic moved to a quorum queue, migrated.
const migrateQuorum = `name: orders
exchanges:
  - {name: shop, type: topic}
queues:
  - name: orders
    type: quorum
    migrate: true
    dlq: false
    bindings: [{exchange: shop, routing_key: "order.*"}]
`

// TestOnlineMigrationKilledAtEachStep kills a real rmqtopo process with
// SIGKILL at each step of a migration (in the middle of both moves too),
// then applies again: the migration finishes and every message is there.
func TestOnlineMigrationKilledAtEachStep(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "rmqtopo")
	if out, err := exec.Command("go", "build", "-tags", "rmqtopo_testhooks", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, at := range []string{broker.StepTemp, broker.StepBindTemp, broker.StepMoveOut + ":1000", broker.StepDelete,
		broker.StepDeclare, broker.StepRebind, broker.StepMoveBack + ":1000", broker.StepDone} {
		t.Run(strings.ReplaceAll(at, ":", "@"), func(t *testing.T) {
			t.Parallel()
			o := newOnline(t)
			o.must(t, 0, "apply", "--auto-approve", o.spec(t, "classic.yaml", migrateClassic))
			conn := o.b.Dial(t, o.vhost)
			const n = 3000
			publishNumbered(t, conn, n)
			path := o.spec(t, "quorum.yaml", migrateQuorum)

			cmd := exec.Command(bin, append([]string{"apply", "--auto-approve", path}, o.conn()...)...)
			cmd.Env = append(os.Environ(), failpoint.Env+"="+at)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("apply was not killed at %s: %v\n%s", at, err, out)
			}

			if at == broker.StepDone {
				// Killed once the migration was over: nothing is left to do.
				o.must(t, 0, "plan", "--detailed-exitcode", path)
			} else {
				plan := o.must(t, 2, "plan", "--detailed-exitcode", path)
				if !strings.Contains(plan, `>/+ queue "orders"`) {
					t.Errorf("the plan after the kill does not resume the migration:\n%s", plan)
				}
				// The killed apply's lock goes once the broker sees its
				// connection closed, later on a busy machine: wait for it.
				// The lock timeout is a guard: the socket closes with the
				// process and apply re-tries the lock at most every 2 s, so
				// it needs a second or two (0.3-1.3 s seen); 6 s keeps the
				// minute it had.
				o.must(t, 0, "apply", "--auto-approve", "--lock-timeout", waitguard.For(6*time.Second).String(), path)
			}
			o.must(t, 0, "plan", "--detailed-exitcode", path)
			got := drainNumbered(t, conn, n)
			for i := 0; i < n; i++ {
				if got[i] == 0 {
					t.Fatalf("message %d lost (%d of %d back)", i, len(got), n)
				}
			}
			t.Logf("killed at %s: %d messages back, %d distinct", at, sum(got), len(got))
		})
	}
}

// publishNumbered publishes messages 0..n-1 to orders through shop, with
// confirms.
func publishNumbered(t *testing.T, conn *amqp.Connection, n int) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	var dcs []*amqp.DeferredConfirmation
	for i := 0; i < n; i++ {
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "shop", "order.new", true, false,
			amqp.Publishing{DeliveryMode: amqp.Persistent, MessageId: strconv.Itoa(i)})
		if err != nil {
			t.Fatal(err)
		}
		dcs = append(dcs, dc)
	}
	for _, dc := range dcs {
		if ok, err := dc.WaitContext(context.Background()); !ok || err != nil {
			t.Fatalf("publish not confirmed: %v", err)
		}
	}
}

// drainNumbered consumes orders until n distinct ids came, or its guard
// runs out, and counts each id's deliveries. The guard is not an idle
// time: a broker that pauses longer than one on a busy machine must not
// make messages look lost. Draining 3,000 takes well under a second
// (0.05-0.3 s seen on a loaded machine).
func drainNumbered(t *testing.T, conn *amqp.Connection, n int) map[int]int {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	ch.Qos(500, 0, false)
	ds, err := ch.Consume("orders", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]int{}
	guard := time.NewTimer(waitguard.For(time.Second))
	defer guard.Stop()
	for len(got) < n {
		select {
		case d := <-ds:
			id, _ := strconv.Atoi(d.MessageId)
			got[id]++
			d.Ack(false)
		case <-guard.C:
			return got
		}
	}
	return got
}

func sum(m map[int]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
