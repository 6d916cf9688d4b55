package spec

import (
	"testing"

	"github.com/rmqtopo/rmqtopo/topology"
)

// TestQuorumInitialGroupSize checks that quorum_initial_group_size reaches
// every quorum queue a spec declares or generates (work queue, DLQ,
// parking lot, shared and per-attempt wait queues, presets), no classic
// queue, and nothing at all when unset.
func TestQuorumInitialGroupSize(t *testing.T) {
	const body = `queues:
  - name: q
    type: quorum
    parking_lot: true
    retry: {delays: [1s, 2s]}
  - name: pa
    type: quorum
    layout: per-attempt
    retry: {delays: [3s]}
  - name: sp
    type: quorum
    preset: spring
    retry: {delays: [1s]}
  - name: c
    type: classic
    retry: {delays: [1s]}
`
	expand := func(t *testing.T, head string) topology.Topology {
		t.Helper()
		f, err := Parse("g.yaml", []byte("version: 1\n"+head+body))
		if err != nil {
			t.Fatal(err)
		}
		return Expand(f)
	}
	t.Run("set", func(t *testing.T) {
		top := expand(t, "quorum_initial_group_size: 3\n")
		quorum := 0
		for _, q := range top.Queues {
			got, has := q.Arguments["x-quorum-initial-group-size"]
			switch {
			case q.QueueType() == TypeQuorum && got != int64(3):
				t.Errorf("quorum queue %q: x-quorum-initial-group-size = %#v, want int64(3)", q.Name, got)
			case q.QueueType() != TypeQuorum && has:
				t.Errorf("%s queue %q carries x-quorum-initial-group-size %v", q.QueueType(), q.Name, got)
			}
			if q.QueueType() == TypeQuorum {
				quorum++
			}
		}
		if quorum < 8 {
			t.Errorf("only %d quorum queues generated; the spec should make at least 8", quorum)
		}
	})
	t.Run("unset", func(t *testing.T) {
		for _, q := range expand(t, "").Queues {
			if v, has := q.Arguments["x-quorum-initial-group-size"]; has {
				t.Errorf("queue %q carries x-quorum-initial-group-size %v without the spec asking", q.Name, v)
			}
		}
	})
}
