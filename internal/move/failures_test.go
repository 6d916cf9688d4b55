package move_test

import (
	"context"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/move"
)

// TestTargetMissing moves to a queue that does not exist: every copy comes
// back unroutable, so the pass fails and every message stays in the source.
func TestTargetMissing(t *testing.T) {
	each(t, func(t *testing.T, typ string, m mode) {
		e := newEnv(t)
		e.declare("src", typ, nil)
		e.publish("src", 30)
		res, err := e.run(move.Pass{Queue: "src", Target: "nowhere", Window: 8, InPlaceRequeue: typ == "classic", UntilEmpty: m.untilEmpty})
		if err == nil || !strings.Contains(err.Error(), `queue "nowhere" returned`) {
			t.Errorf("Run error = %v, want the unroutable copies reported", err)
		}
		if res.Moved != 0 || res.Failed == 0 {
			t.Errorf("result %+v, want nothing moved and failures counted", res)
		}
		src := e.read("src")
		nothingLost(t, 30, src)
		if !m.untilEmpty { // a scan requeues what it held in order
			same(t, "source", ids(0, 30, nil), src)
		}
	})
}

// TestTargetDeletedMidMove deletes the target while the pass runs: once
// its first 40 copies are in the target (read out and recorded, so that
// the delete takes no message with it) and before the pass publishes the
// 41st. The copies that follow come back unroutable: the pass fails and
// keeps their sources.
func TestTargetDeletedMidMove(t *testing.T) {
	each(t, func(t *testing.T, typ string, m mode) {
		e := newEnv(t)
		e.declare("src", typ, nil)
		e.declare("dst", other(typ), nil)
		e.publish("src", 100)
		var reached []string // what reached the target before its delete
		res, err := e.run(move.Pass{Queue: "src", Target: "dst", Window: 10, InPlaceRequeue: typ == "classic", UntilEmpty: m.untilEmpty,
			Decide: func(pos int, _ *amqp.Delivery) move.Decision {
				if pos == 41 {
					reached = e.deleteAfter("dst", 40)
				}
				return move.Decision{Move: true}
			}})
		if err == nil || !strings.Contains(err.Error(), `queue "dst" returned`) {
			t.Errorf("Run error = %v, want the unroutable copies reported", err)
		}
		if res.Moved > 40 {
			t.Errorf("result %+v: more moved than reached the target", res)
		}
		same(t, "in the target before its delete", ids(0, 40, nil), reached)
		src := e.read("src")
		contains(t, "source", src, ids(40, 100, nil))
		nothingLost(t, 100, reached, src)
	})
}

// deleteAfter waits until queue holds n messages, takes them out, deletes
// the queue and returns the messages' ids. It runs inside a pass's Decide:
// the pass publishes nothing meanwhile, so the delete takes no message.
func (e *env) deleteAfter(queue string, n int) []string {
	e.waitFor("the first copies to reach "+queue, func() bool {
		ready, _, _ := e.stat(queue)
		return ready >= n
	})
	got := e.read(queue)
	ch, err := e.conn.Channel()
	if err != nil {
		e.t.Fatal(err)
	}
	defer ch.Close()
	if _, err := ch.QueueDelete(queue, false, false, false); err != nil {
		e.t.Fatalf("deleting %q: %v", queue, err)
	}
	return got
}

// TestTargetRejectsPublish moves into a queue that holds 4 messages and
// rejects publishes beyond: the broker nacks the fifth copy on, so the
// pass fails and their sources stay.
func TestTargetRejectsPublish(t *testing.T) {
	each(t, func(t *testing.T, typ string, m mode) {
		e := newEnv(t)
		e.declare("src", typ, nil)
		e.declare("full", "classic", amqp.Table{"x-max-length": int64(4), "x-overflow": "reject-publish"})
		e.publish("src", 30)
		res, err := e.run(move.Pass{Queue: "src", Target: "full", Window: 8, InPlaceRequeue: typ == "classic", UntilEmpty: m.untilEmpty})
		if err == nil || !strings.Contains(err.Error(), "the broker did not confirm") {
			t.Errorf("Run error = %v, want the nacked copies reported", err)
		}
		if res.Moved != 4 || res.Failed == 0 {
			t.Errorf("result %+v, want 4 moved and failures counted", res)
		}
		same(t, "target", ids(0, 4, nil), e.read("full"))
		src := e.read("src")
		contains(t, "source", src, ids(4, 30, nil))
		nothingLost(t, 30, ids(0, 4, nil), src)
		if !m.untilEmpty { // a scan requeues what it held in order
			same(t, "source", ids(4, 30, nil), src)
		}
	})
}

// TestInterrupted cancels the pass's context at its 100th message: it
// stops, settles the moves in flight, and fails with every message in the
// source or the target. Moves are made in order, so the target holds the
// first messages, one per move.
func TestInterrupted(t *testing.T) {
	each(t, func(t *testing.T, typ string, m mode) {
		e := newEnv(t)
		e.declare("src", typ, nil)
		e.declare("dst", other(typ), nil)
		e.publish("src", 300)
		ctx, cancel := context.WithTimeout(context.Background(), wait())
		defer cancel()
		res, err := move.Pass{Queue: "src", Target: "dst", Window: 16, InPlaceRequeue: typ == "classic", UntilEmpty: m.untilEmpty,
			Decide: func(pos int, _ *amqp.Delivery) move.Decision {
				if pos == 100 {
					cancel()
				}
				return move.Decision{Move: true}
			}}.Run(ctx, e.conn)
		if err == nil || !strings.Contains(err.Error(), "interrupted") {
			t.Errorf("Run error = %v, want interrupted", err)
		}
		if res.Failed != 0 || res.Moved < 100 || res.Moved == 300 {
			t.Errorf("result %+v, want at least 100 moved, not all, none failed", res)
		}
		dst := e.read("dst")
		same(t, "target", ids(0, res.Moved, nil), dst)
		src := e.read("src")
		contains(t, "source", src, ids(res.Moved, 300, nil))
		nothingLost(t, 300, dst, src)
		if !m.untilEmpty { // a scan requeues what it held in order
			same(t, "source", ids(res.Moved, 300, nil), src)
		}
	})
}
