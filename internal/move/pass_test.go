package move_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/move"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
)

// TestUntilEmptyMovesEverything: a move until empty (a migration's) takes
// every message, in order, and leaves the source empty. 250 messages cross
// both kinds of ack: multiple acks of a hundred and the final ones.
func TestUntilEmptyMovesEverything(t *testing.T) {
	for _, typ := range queueTypes {
		t.Run(typ, func(t *testing.T) {
			e := newEnv(t)
			e.declare("src", typ, nil)
			e.declare("dst", other(typ), nil)
			e.publish("src", 250)
			res, err := e.run(move.Pass{Queue: "src", Target: "dst", UntilEmpty: true})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			want := move.Result{Queue: "src", Target: "dst", Depth: 250, Scanned: 250, Moved: 250}
			if diff := cmp.Diff(want, res); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			same(t, "target", ids(0, 250, nil), e.read("dst"))
			same(t, "source", nil, e.read("src"))
		})
	}
}

// TestPassMovesSome: a pass that moves the messages at even positions
// leaves the others in the source, in their order.
func TestPassMovesSome(t *testing.T) {
	for _, typ := range queueTypes {
		t.Run(typ, func(t *testing.T) {
			e := newEnv(t)
			e.declare("src", typ, nil)
			e.declare("dst", other(typ), nil)
			e.publish("src", 60)
			res, err := e.run(move.Pass{Queue: "src", Target: "dst", InPlaceRequeue: typ == "classic",
				Decide: func(pos int, d *amqp.Delivery) move.Decision {
					if d.MessageId != id(pos-1) {
						t.Errorf("position %d is message %s", pos, d.MessageId)
					}
					return move.Decision{Move: pos%2 == 0, Note: "odd"}
				}})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			want := move.Result{Queue: "src", Target: "dst", Depth: 60, Scanned: 60, Moved: 30, Left: 30, LeftBy: map[string]int{"odd": 30}}
			if diff := cmp.Diff(want, res); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			odd := func(i int) bool { return i%2 == 1 } // position i+1 even
			same(t, "target", ids(0, 60, odd), e.read("dst"))
			same(t, "source", ids(0, 60, func(i int) bool { return !odd(i) }), e.read("src"))
		})
	}
}

// TestSmallWindow: with a window of 10 for 95 messages, a scan relays its
// consumer each time one holds a full window of messages it leaves, and a
// move until empty waits for confirms each time a window is in flight;
// nothing is skipped, repeated or reordered.
func TestSmallWindow(t *testing.T) {
	each(t, func(t *testing.T, typ string, m mode) {
		e := newEnv(t)
		e.declare("src", typ, nil)
		e.declare("dst", other(typ), nil)
		e.publish("src", 95)
		moves := func(i int) bool { return m.untilEmpty || i%3 == 2 } // every third position
		res, err := e.run(move.Pass{Queue: "src", Target: "dst", Window: 10, InPlaceRequeue: typ == "classic", UntilEmpty: m.untilEmpty,
			Decide: func(pos int, d *amqp.Delivery) move.Decision {
				if d.MessageId != id(pos-1) {
					t.Errorf("position %d is message %s", pos, d.MessageId)
				}
				return move.Decision{Move: moves(pos - 1)}
			}})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		moved := ids(0, 95, moves)
		want := move.Result{Queue: "src", Target: "dst", Depth: 95, Scanned: 95, Moved: len(moved), Left: 95 - len(moved)}
		if diff := cmp.Diff(want, res); diff != "" {
			t.Errorf("result (-want +got):\n%s", diff)
		}
		same(t, "target", moved, e.read("dst"))
		same(t, "source", ids(0, 95, func(i int) bool { return !moves(i) }), e.read("src"))
	})
}

// TestUntilEmptySlowProgress: a move until empty whose Progress is slow
// (a progress line to a slow terminal or log; 200ms, four times the quiet
// after which the engine checks whether the queue is drained) and whose
// Decide stalls as long at every 20th message still empties its source.
// While the pass is busy the broker sends the next deliveries, which are
// not ready any more: the queue looks empty while they are on their way,
// so neither its count of ready messages nor a quiet spell may end the
// move. The engine picks at random between a waiting delivery and its
// idle tick, so the move runs three times.
func TestUntilEmptySlowProgress(t *testing.T) {
	for _, typ := range queueTypes {
		t.Run(typ, func(t *testing.T) {
			e := newEnv(t)
			e.declare("src", typ, nil)
			e.declare("dst", other(typ), nil)
			for range 3 {
				e.publish("src", 45)
				res, err := e.run(move.Pass{Queue: "src", Target: "dst", Window: 10, UntilEmpty: true,
					Progress: func(move.Result) { time.Sleep(200 * time.Millisecond) },
					Decide: func(pos int, _ *amqp.Delivery) move.Decision {
						if pos%20 == 0 {
							time.Sleep(200 * time.Millisecond)
						}
						return move.Decision{Move: true}
					}})
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				if res.Moved != 45 {
					t.Errorf("moved %d of 45", res.Moved)
				}
				same(t, "target", ids(0, 45, nil), e.read("dst"))
				same(t, "source", nil, e.read("src"))
			}
		})
	}
}

// TestUntilEmptySlowLink: a move until empty whose deliveries reach it
// 200ms after the broker sent them, four times the quiet after which the
// engine checks whether the queue is drained. Each ack of a window lets the
// broker send the next one at once; until it arrives the pass is quiet and
// the queue has no ready message, the next window being on the wire. The
// pass must take it and every later one: the queue's having no ready
// message after a quiet spell is no proof that it is drained.
func TestUntilEmptySlowLink(t *testing.T) {
	for _, typ := range queueTypes {
		t.Run(typ, func(t *testing.T) {
			e := newEnv(t)
			e.declare("src", typ, nil)
			e.declare("dst", other(typ), nil)
			e.publish("src", 25)
			conn := e.dialSlow(200 * time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), wait())
			defer cancel()
			res, err := move.Pass{Queue: "src", Target: "dst", Window: 10, UntilEmpty: true}.Run(ctx, conn)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Moved != 25 {
				t.Errorf("moved %d of 25", res.Moved)
			}
			conn.Close() // gives back what the pass may have left behind
			same(t, "target", ids(0, 25, nil), e.read("dst"))
			same(t, "source", nil, e.read("src"))
		})
	}
}

// TestUntilEmptyLeaves: a move until empty whose Decide leaves a message
// holds it to the end, when closing the channel gives it back. A quorum
// queue counts the consumer that holds it until then, so the drain check
// must not wait for that count (past SettleTimeout it would go on with a
// warning, which the Result check catches). The passing pass never reaches
// SettleTimeout, which also bounds its waits for confirms: a hang guard
// (it was 5 s, so that a regression failed sooner).
func TestUntilEmptyLeaves(t *testing.T) {
	for _, typ := range queueTypes {
		t.Run(typ, func(t *testing.T) {
			e := newEnv(t)
			e.declare("src", typ, nil)
			e.declare("dst", other(typ), nil)
			e.publish("src", 30)
			res, err := e.run(move.Pass{Queue: "src", Target: "dst", UntilEmpty: true, SettleTimeout: waitguard.For(time.Second),
				Decide: func(pos int, _ *amqp.Delivery) move.Decision {
					return move.Decision{Move: pos != 5, Note: "kept"}
				}})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			want := move.Result{Queue: "src", Target: "dst", Depth: 30, Scanned: 30, Moved: 29, Left: 1, LeftBy: map[string]int{"kept": 1}}
			if diff := cmp.Diff(want, res); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			same(t, "target", ids(0, 30, func(i int) bool { return i != 4 }), e.read("dst"))
			same(t, "source", ids(4, 5, nil), e.read("src"))
		})
	}
}
