package status

import (
	"context"
	"slices"
	"time"

	"github.com/rmqtopo/rmqtopo/internal/broker"
)

// Held dead-letters that do not move.
//
// A dead-letter a wait queue holds has already waited its TTL: it expired,
// and the quorum queue keeps it until the work queue confirms it. Status
// reads the broker once and keeps no state between runs, so it cannot see
// how long a dead-letter has been held. It infers instead: it re-reads the
// wait queues that hold dead-letters for a margin, and calls a queue stuck
// when its held count never fell below the first reading. New dead-letters
// only add to the count, so a count that never falls means that none of the
// first ones was forwarded, unless new ones replaced them as fast as they
// left: an approximation, which docs/operations.md spells out.

// HeldQueue is a wait queue and the dead-letters it holds.
type HeldQueue struct {
	Vhost string
	Name  string
	Held  int64
}

// HeldQueues returns the wait queues of s that hold dead-letters, each once
// however many work queues share it, in the order of the tables.
func HeldQueues(s Report) []HeldQueue {
	var out []HeldQueue
	seen := map[vhostQueue]bool{}
	for _, wq := range s.Queues {
		for _, q := range wq.Queues {
			k := vhostQueue{wq.Vhost, q.Name}
			if q.Role == RoleWait && q.Held > 0 && !seen[k] {
				seen[k] = true
				out = append(out, HeldQueue{Vhost: wq.Vhost, Name: q.Name, Held: q.Held})
			}
		}
	}
	return out
}

// Forwarded reports whether a wait queue that held before dead-letters at
// its first reading has forwarded any by a reading that counts now.
func Forwarded(before, now int64) bool { return now < before }

// HeldWatch re-reads wait queues that hold dead-letters.
type HeldWatch struct {
	// Margin is how long to watch; Every is the time between readings,
	// the management API's statistics interval (a reading sooner repeats
	// the last one).
	Margin, Every time.Duration
	// Read reads a queue; false without an error when it no longer exists.
	Read func(ctx context.Context, vhost, name string) (broker.QueueInfo, bool, error)
	// Sleep waits d or until ctx ends; nil sleeps on the clock.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Stuck re-reads the queues every w.Every for w.Margin and returns those
// whose held count never fell, with their count at the last reading. It
// stops early once every queue has forwarded some. Without a margin it
// reads nothing and calls nothing stuck.
func (w HeldWatch) Stuck(ctx context.Context, held []HeldQueue) ([]HeldQueue, error) {
	if w.Margin <= 0 || w.Every <= 0 {
		return nil, nil
	}
	sleep := w.Sleep
	if sleep == nil {
		sleep = sleepCtx
	}
	first := map[vhostQueue]int64{}
	for _, q := range held {
		first[vhostQueue{q.Vhost, q.Name}] = q.Held
	}
	pending := held
	for waited := time.Duration(0); waited < w.Margin && len(pending) > 0; {
		d := min(w.Every, w.Margin-waited)
		if err := sleep(ctx, d); err != nil {
			return nil, err
		}
		waited += d
		var err error
		if pending, err = w.reread(ctx, pending, first); err != nil {
			return nil, err
		}
	}
	return pending, nil
}

// reread reads the pending queues again and returns those that have
// forwarded nothing since their first reading, with their counts now.
func (w HeldWatch) reread(ctx context.Context, pending []HeldQueue, first map[vhostQueue]int64) ([]HeldQueue, error) {
	var still []HeldQueue
	for _, q := range pending {
		info, ok, err := w.Read(ctx, q.Vhost, q.Name)
		if err != nil {
			return nil, err
		}
		var now int64 // a queue deleted since holds nothing
		if ok {
			now = info.DeadLettersHeld()
		}
		if !Forwarded(first[vhostQueue{q.Vhost, q.Name}], now) {
			q.Held = now
			still = append(still, q)
		}
	}
	return still, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// MarkStuck records in s that status watched the held wait queues for
// margin, and flags and counts the stuck ones on every row that shows them.
func MarkStuck(s *Report, margin time.Duration, stuck []HeldQueue) {
	s.HeldMargin = margin.String()
	counts := map[vhostQueue]int64{}
	for _, q := range stuck {
		counts[vhostQueue{q.Vhost, q.Name}] = q.Held
		s.Summary.WaitQueuesStuck++
		s.Summary.DeadLettersStuck += q.Held
	}
	for i := range s.Queues {
		wq := &s.Queues[i]
		for j := range wq.Queues {
			row := &wq.Queues[j]
			n, ok := counts[vhostQueue{wq.Vhost, row.Name}]
			if !ok || row.Role != RoleWait {
				continue
			}
			row.Stuck = n
			at := slices.Index(row.Flags, FlagHeld) + 1 // next to the held flag
			row.Flags = slices.Insert(row.Flags, at, FlagStuck)
		}
	}
}
