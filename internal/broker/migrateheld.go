package broker

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/rmqtopo/rmqtopo/internal/english"
	"github.com/rmqtopo/rmqtopo/topology"
)

// heldPause is how often a migration looks again at what a queue holds
// beyond its ready messages; heldMargin is how long past the time the
// broker gave for the last held retry it still waits for it.
const (
	heldPause  = time.Second
	heldMargin = 10 * time.Second
)

// noneHeld keeps a quorum queue from being deleted while it holds a
// message that its ready count leaves out (see freshTotals): a retry held
// back for a delayed retry (RabbitMQ 4.3), a delivery its consumers have
// not settled, a dead-letter awaiting its target's confirm. While the
// statistics show such messages it waits, saying for what through
// Session.MigrateWait (they may be a little old: what they show was held
// then); once they show none, a total fresh since then decides. It returns
// nil once that total is 0; ErrNotEmpty once a message is ready again (a
// retry came due, a delivery was requeued: the migration moves again); and
// heldTooLong once what is held outlasts its time: a held retry the time
// the broker says the last one is due and heldMargin, anything else
// settleTimeout. It waits only as long as what is held needs.
func (m *migration) noneHeld(ctx context.Context, q topology.Queue, check bool) error {
	if !check || q.QueueType() != "quorum" {
		return nil
	}
	start := time.Now()
	for {
		ready, _, err := m.s.queueStat(ctx, q.Vhost, q.Name)
		if err != nil {
			return ignoreNotFound(err)
		}
		if ready > 0 {
			return &Error{Kind: ErrNotEmpty, Msg: fmt.Sprintf("queue %q holds %s again", q.Name, count(ready, "ready message", "ready messages"))}
		}
		info, err := m.s.GetQueue(ctx, q.Vhost, q.Name)
		if err != nil {
			return ignoreNotFound(err)
		}
		if info.Messages-info.Ready <= 0 {
			held, err := m.heldNow(ctx, q)
			if err != nil || held == 0 {
				return err
			}
			info.Messages = max(info.Messages, held)
		}
		what, until := heldWait(info, start, time.Now())
		m.wait(what)
		if time.Now().After(until) {
			return heldTooLong{&Error{Kind: ErrNotEmpty, Msg: fmt.Sprintf(
				"queue %q was kept: it is still %s; the migration resumes at the next apply", q.Name, what)}}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(heldPause):
		}
	}
}

// heldNow is q's fresh total (see freshTotals): what it holds, its ready
// messages included, as of a tick after the call.
func (m *migration) heldNow(ctx context.Context, q topology.Queue) (int64, error) {
	totals, err := m.s.freshTotals(ctx, q.Vhost, []string{q.Name})
	if err != nil {
		return 0, ignoreNotFound(err)
	}
	total, fresh := totals[q.Name]
	if !fresh {
		return 0, &Error{Kind: ErrNotEmpty, Msg: fmt.Sprintf("the statistics of queue %q did not renew within %s to say whether it holds retries back or unsettled deliveries", q.Name, freshWait)}
	}
	return total, nil
}

// heldWait says what queue info holds beyond its ready messages, as the
// progress line of a wait ("waiting for 5 retries the broker holds, the
// last due in 16s"), and until when a migration that began waiting at
// start waits for it.
func heldWait(info QueueInfo, start, now time.Time) (string, time.Time) {
	until := start.Add(settleTimeout)
	switch {
	case info.Delayed != nil && *info.Delayed > 0:
		what := fmt.Sprintf("waiting for %s the broker holds", count(int(*info.Delayed), "retry", "retries"))
		if info.LastDelayedAt != nil {
			due := time.UnixMilli(*info.LastDelayedAt)
			what += fmt.Sprintf(", the last due in %s", max(due.Sub(now), 0).Round(time.Second))
			until = due.Add(heldMargin)
		}
		return what, until
	case info.Unacked > 0:
		return fmt.Sprintf("waiting for %s that its %s have not settled", count(int(info.Unacked), "delivery", "deliveries"), count(int(info.Consumers), "consumer", "consumers")), until
	case info.DeadLettered != nil && *info.DeadLettered > 0:
		return fmt.Sprintf("waiting for %s to be confirmed by their target", count(int(*info.DeadLettered), "dead-letter", "dead-letters")), until
	}
	return fmt.Sprintf("waiting for %s it holds beyond its ready ones", count(int(max(info.Messages-info.Ready, 1)), "message", "messages")), until
}

// heldTooLong is ErrNotEmpty for a queue whose held messages outlasted
// their time: moving again would not help, so the migration stops, keeping
// the queue and what it holds.
type heldTooLong struct{ err *Error }

func (h heldTooLong) Error() string { return h.err.Error() }
func (h heldTooLong) Unwrap() error { return h.err }

// wait reports what the migration waits for.
func (m *migration) wait(what string) {
	if m.s.MigrateWait != nil {
		m.s.MigrateWait(m.q.Name, what)
	}
}

// MigrationWaitLog returns a Session.MigrateWait that reports on w what a
// migration waits for: when it changes, and else every 5 s.
func MigrationWaitLog(w io.Writer) func(queue, what string) {
	var (
		mu        sync.Mutex
		last      string
		lastAt    time.Time
		lastQueue string
	)
	return func(queue, what string) {
		mu.Lock()
		defer mu.Unlock()
		if queue == lastQueue && what == last && time.Since(lastAt) < 5*time.Second {
			return
		}
		last, lastAt, lastQueue = what, time.Now(), queue
		fmt.Fprintf(w, "migrate queue %q: %s\n", queue, what)
	}
}

// count is n and its noun in number: "1 retry", "5 retries".
func count(n int, one, many string) string {
	return fmt.Sprintf("%d %s", n, english.Plural(n, one, many))
}
