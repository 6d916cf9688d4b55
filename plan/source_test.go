package plan_test

import (
	"context"
	"strings"
	"testing"

	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

// changingSource is a broker that changes under a plan: its reads return
// states in turn (the last again once they run out), and its first
// vanishing counts find gone every queue asked of them.
type changingSource struct {
	states    []*topology.State
	reads     int
	vanishing int
}

func (s *changingSource) Read(ctx context.Context, vhosts []string) (*topology.State, error) {
	st := s.states[min(s.reads, len(s.states)-1)]
	s.reads++
	return st, nil
}

func (s *changingSource) Count(ctx context.Context, st *topology.State, need map[string][]string) error {
	gone := s.vanishing > 0
	s.vanishing--
	for v, names := range need {
		for _, n := range names {
			a := topology.Address{Kind: topology.KindQueue, Vhost: v, Name: n}
			if !gone {
				st.Messages[a], st.Consumers[a] = 0, 0
				continue
			}
			if st.Vanished == nil {
				st.Vanished = map[topology.Address]bool{}
			}
			st.Vanished[a] = true
		}
	}
	return nil
}

// stateWith is a state of vhost "/" holding queues, all owned.
func stateWith(queues ...topology.Queue) *topology.State {
	st := topology.NewState([]string{"/"})
	st.Topology = topology.Topology{Vhosts: []string{"/"}, Queues: queues}
	return st
}

// TestMakeReadsAgainWhenAQueueVanished: a queue read as classic, to be
// replaced by a quorum one, is gone by the time it is counted (a killed
// apply's delete landing late). The plan reads again and creates the
// queue, instead of refusing a replace whose count it could not tell.
func TestMakeReadsAgainWhenAQueueVanished(t *testing.T) {
	quorum := queue("orders", topology.Args{"x-queue-type": "quorum"})
	src := &changingSource{states: []*topology.State{stateWith(queue("orders", nil)), stateWith()}, vanishing: 1}
	desired := topology.Topology{Vhosts: []string{"/"}, Queues: []topology.Queue{quorum}}
	p, st, err := plan.Make(context.Background(), src, desired, plan.Choices{Specs: map[string]string{"/": "s"}})
	if err != nil {
		t.Fatal(err)
	}
	if src.reads != 2 {
		t.Errorf("read %d times, want 2 (once more after the count found orders gone)", src.reads)
	}
	if len(st.Vanished) != 0 {
		t.Errorf("the state returned still has vanished queues %v", st.Vanished)
	}
	if got := rows(p, false); len(got) != 1 || !strings.Contains(got[0], "orders") || p.Changes[0].Action != plan.Create {
		t.Errorf("changes:\n%s\nwant the one create of orders", strings.Join(got, "\n"))
	}
}

// TestMakeStopsReadingAgain: a broker whose queues vanish at every count
// is read readAttempts (3) times, and the replace keeps an unknown count,
// which the check refuses.
func TestMakeStopsReadingAgain(t *testing.T) {
	quorum := queue("orders", topology.Args{"x-queue-type": "quorum"})
	src := &changingSource{states: []*topology.State{stateWith(queue("orders", nil))}, vanishing: 99}
	desired := topology.Topology{Vhosts: []string{"/"}, Queues: []topology.Queue{quorum}}
	p, st, err := plan.Make(context.Background(), src, desired, plan.Choices{Specs: map[string]string{"/": "s"}})
	if err != nil {
		t.Fatal(err)
	}
	if src.reads != 3 {
		t.Errorf("read %d times, want 3", src.reads)
	}
	a := topology.Address{Kind: topology.KindQueue, Vhost: "/", Name: "orders"}
	if !st.Vanished[a] {
		t.Errorf("the third count did not find orders gone: %v", st.Vanished)
	}
	replaced := false
	for _, c := range p.Changes {
		if c.Address == a {
			replaced = c.Action == plan.Replace && (c.Details == nil || c.Details.Messages == nil)
		}
	}
	if !replaced {
		t.Errorf("orders is not a replace of unknown count:\n%s", strings.Join(rows(p, false), "\n"))
	}
}
