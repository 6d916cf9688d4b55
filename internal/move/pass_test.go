package move_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/internal/move"
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
