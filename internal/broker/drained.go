package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// WaitDrained waits until each queue of names in vhost holds nothing:
// the retired queues that dead-letter into queue into by its name, which a
// migration of into waits for (target.Drainer). Each is read as a
// migration reads the queue it deletes: its statistics, its exact ready
// count and, once both say empty, a fresh total (a quorum queue's
// held dead-letters included). Its messages leave it by themselves, at
// its TTL: past that TTL and heldMargin, counted from the start of the
// wait, a queue still holding something is refused with ErrNotEmpty
// (something still publishes to it), and into is not migrated. A queue
// that does not exist is drained.
func (s *Session) WaitDrained(ctx context.Context, vhost, into string, names []string) error {
	for _, name := range names {
		if err := s.waitDrained(ctx, vhost, into, name); err != nil {
			return err
		}
	}
	return nil
}

func (s *Session) waitDrained(ctx context.Context, vhost, into, name string) error {
	start := time.Now()
	for {
		held, ttl, err := s.holds(ctx, vhost, name)
		if err != nil || held == 0 {
			return ignoreNotFound(err)
		}
		n := count(int(held), "message", "messages")
		if held < 0 {
			n = "what its statistics do not show yet"
		}
		what := fmt.Sprintf("waiting for %s in retired queue %q to dead-letter back into it", n, name)
		if s.MigrateWait != nil {
			s.MigrateWait(into, what)
		}
		if time.Since(start) > ttl+heldMargin {
			return &Error{Kind: ErrNotEmpty, Msg: fmt.Sprintf(
				"queue %q is not migrated: retired queue %q, which dead-letters into it by name, still holds %s %s after the wait began, past its TTL (%s); something still publishes to it: stop that and apply again",
				into, name, n, time.Since(start).Round(time.Second), ttl)}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(heldPause):
		}
	}
}

// holds is what queue name holds, 0 only once its statistics, its exact
// ready count and a fresh total all say so, -1 when its statistics did
// not renew in time (unknown), and its TTL.
func (s *Session) holds(ctx context.Context, vhost, name string) (int64, time.Duration, error) {
	info, err := s.GetQueue(ctx, vhost, name)
	if err != nil {
		return 0, 0, err
	}
	var wait time.Duration
	switch v := info.Arguments["x-message-ttl"].(type) {
	case float64:
		wait = time.Duration(v) * time.Millisecond
	case json.Number:
		n, _ := v.Int64()
		wait = time.Duration(n) * time.Millisecond
	case int64:
		wait = time.Duration(v) * time.Millisecond
	}
	ready, _, err := s.queueStat(ctx, vhost, name)
	if err != nil || max(info.Messages, int64(ready)) > 0 {
		return max(info.Messages, int64(ready)), wait, err
	}
	totals, err := s.freshTotals(ctx, vhost, []string{name})
	if err != nil {
		return 0, wait, err
	}
	total, fresh := totals[name]
	switch {
	case !fresh && info.Type == "quorum":
		return -1, wait, nil // unknown: its statistics did not renew; wait on
	case !fresh:
		return 0, wait, nil // classic: the exact count is the total
	}
	return total, wait, nil
}
