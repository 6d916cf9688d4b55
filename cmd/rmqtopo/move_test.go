package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
)

const renameBefore = `exchanges:
  - {name: notify, type: topic}
queues:
  - name: push.send
    type: %s
    bindings: [{exchange: notify, routing_key: "push.#"}]
`

const renameAfter = `exchanges:
  - {name: notify, type: topic}
queues:
  - name: push.deliver
    type: %s
    bindings: [{exchange: notify, routing_key: "push.#"}]
`

// TestOnlineRenameMovesMessagesAsTheyAre: a queue renamed in the spec is
// applied without --prune (the new queue takes the route), then rmqtopo
// move hands the old queue's messages to the new one with every property
// and header as published (x-death and rmqtopo's own included, no replay
// stamp), in order, none lost; then the old queue, empty, is pruned.
func TestOnlineRenameMovesMessagesAsTheyAre(t *testing.T) {
	for _, typ := range []string{"classic", "quorum"} {
		t.Run(typ, func(t *testing.T) {
			o := newOnline(t)
			o.must(t, 0, "apply", "--auto-approve", o.spec(t, "before.yaml", strings.ReplaceAll(renameBefore, "%s", typ)))
			conn := o.b.Dial(t, o.vhost)
			const n = 25
			sent := publishN(t, conn, "push.send", "p", n, func(i int) amqp.Table {
				h := deaths(int64(i%3 + 1))
				h[contract.HeaderAttempt] = "2"
				h["tenant"] = []string{"acme", "other"}[i%2]
				h["seq"] = int64(i)
				return h
			})
			after := o.spec(t, "after.yaml", strings.ReplaceAll(renameAfter, "%s", typ))
			o.must(t, 0, "apply", "--auto-approve", after)

			if typ == "classic" { // a quorum queue's dry run is a delivery of each message
				dry := o.must(t, 0, "move", "push.send", "--to", "push.deliver", "--vhost", o.vhost, "--dry-run")
				if !strings.Contains(dry, "push.send -> push.deliver: dry run: would move 25, left 0, failed 0") {
					t.Errorf("move --dry-run:\n%s", dry)
				}
			}
			out := o.must(t, 0, "move", "push.send", "--to", "push.deliver", "--vhost", o.vhost)
			if !strings.Contains(out, "push.send -> push.deliver: moved 25, left 0, failed 0") {
				t.Errorf("move:\n%s", out)
			}
			got, ds := drain(t, o.b, conn, o.vhost, "push.deliver")
			if diff := cmp.Diff(sent, got); diff != "" {
				t.Fatalf("moved messages (-sent +got):\n%s", diff)
			}
			for i, d := range ds {
				want := deaths(int64(i%3 + 1))
				want[contract.HeaderAttempt] = "2"
				want["tenant"] = []string{"acme", "other"}[i%2]
				want["seq"] = int64(i)
				h := amqp.Table{}
				for k, v := range d.Headers {
					// What the broker adds to a delivery from a quorum queue.
					if k != "x-delivery-count" && k != "x-acquired-count" {
						h[k] = v
					}
				}
				if diff := cmp.Diff(want, h); diff != "" {
					t.Errorf("message %s's headers (-published +moved):\n%s", d.MessageId, diff)
				}
				if string(d.Body) != "payload "+d.MessageId || d.DeliveryMode != amqp.Persistent {
					t.Errorf("message %s: body %q, delivery mode %d", d.MessageId, d.Body, d.DeliveryMode)
				}
			}
			if depth := o.b.QueueDepth(t, o.vhost, "push.send"); depth != 0 {
				t.Errorf("push.send holds %d messages after the move", depth)
			}
			o.must(t, 0, "apply", "--auto-approve", "--prune", after)
			o.must(t, 0, "plan", "--detailed-exitcode", "--prune", after)
		})
	}
}

// TestMoveRefusesWhatItCannotDo: no move into the queue itself or into a
// queue that does not exist, and nothing leaves the source.
func TestMoveRefusesWhatItCannotDo(t *testing.T) {
	o := newOnline(t)
	conn := o.b.Dial(t, o.vhost)
	declareQueue(t, conn, "a", "classic")
	publishN(t, conn, "a", "m", 3, nil)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"move", "a", "--to", "a", "--vhost", o.vhost}, `rmqtopo: move: queue "a": a queue cannot be moved into itself`},
		{[]string{"move", "a", "--to", "b", "--vhost", o.vhost}, `rmqtopo: move: queue "b" not found in vhost "` + o.vhost + `"`},
	} {
		_, errs, code := rmqtopo(t, "", append(tc.args, o.conn()...)...)
		if code != 1 || strings.TrimSpace(errs) != tc.want {
			t.Errorf("%v: exit %d, stderr %q, want 1 and %q", tc.args, code, errs, tc.want)
		}
	}
	if depth := o.b.QueueDepth(t, o.vhost, "a"); depth != 3 {
		t.Errorf("queue a holds %d messages, want 3", depth)
	}
}
