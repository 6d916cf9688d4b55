package ops

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
)

// Peek reads up to limit messages from the head of queue and leaves every
// message in place, in order. A quorum queue (3.10) puts a requeued
// message at its tail, so peeking only its head would move those messages
// behind the rest: on a quorum queue Peek requeues the whole queue in
// order (reading it, up to its depth when Peek starts) and decodes only the
// first limit messages.
//
// queueType is the queue's type as the management API reports it.
func Peek(ctx context.Context, conn *amqp.Connection, queue, queueType string, limit, window int) ([]Message, Result, error) {
	var msgs []Message
	p := Pass{
		Queue:  queue,
		Window: window,
		Decide: func(pos int, d *amqp.Delivery) Decision {
			if pos <= limit {
				msgs = append(msgs, Decode(pos, d))
			}
			return Decision{}
		},
	}
	if InPlaceRequeue(queueType) {
		p.Scan, p.InPlaceRequeue = limit, true
	}
	if limit <= 0 {
		return nil, Result{Queue: queue}, errors.New("the limit must be at least 1")
	}
	res, err := p.Run(ctx, conn)
	return msgs, res, err
}

// InPlaceRequeue reports whether a queue of the given type puts a requeued
// message back at its position: classic queues do; quorum queues (3.10)
// put it at their tail.
func InPlaceRequeue(queueType string) bool { return queueType == "classic" }

// ReplayOptions selects the messages Replay moves.
type ReplayOptions struct {
	// Queue is the DLQ; To the work queue (default: Queue without ".dlq").
	Queue, To string
	// QueueType is Queue's type, as the management API reports it.
	QueueType string
	// Limit bounds the messages replayed; 0 means all that match.
	Limit int
	// Headers must all match: the header's value, rendered by HeaderString,
	// equals the given one.
	Headers map[string]string
	// RoutingKey, when set, must equal the message's original routing key
	// (see OriginalRoute).
	RoutingKey string
	Window     int
	Progress   func(Result)
	// Now stamps contract.HeaderReplayedAt; nil means time.Now.
	Now func() time.Time
	// DryRun reads the DLQ and counts what would move (Result.LeftBy
	// under NoteWouldMove) without moving anything.
	DryRun bool
}

// ReplayTarget returns the work queue a DLQ's messages are replayed to.
func ReplayTarget(queue, to string) (string, error) {
	if to != "" {
		return to, nil
	}
	work, ok := strings.CutSuffix(queue, contract.DeadLetterQueue(""))
	if !ok || work == "" {
		return "", &NotDLQNameError{Queue: queue}
	}
	return work, nil
}

// Replay moves matching messages from a DLQ back to their work queue for a
// fresh retry cycle (see ReplayHeaders). Non-matching messages stay in
// place, in order. The work queue must exist.
func Replay(ctx context.Context, conn *amqp.Connection, o ReplayOptions) (Result, error) {
	target, err := ReplayTarget(o.Queue, o.To)
	if err != nil {
		return Result{Queue: o.Queue}, err
	}
	if err := queueExists(conn, target); err != nil {
		var nf *QueueNotFoundError
		if errors.As(err, &nf) {
			return Result{Queue: o.Queue, Target: target}, &QueueNotFoundError{Queue: target, Work: true}
		}
		return Result{Queue: o.Queue, Target: target}, err
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	reset := map[string]bool{}
	p := Pass{
		Queue: o.Queue, Target: target, MaxMoves: o.Limit, Window: o.Window, Progress: o.Progress,
		InPlaceRequeue: InPlaceRequeue(o.QueueType),
		Decide: func(_ int, d *amqp.Delivery) Decision {
			if o.RoutingKey != "" {
				if _, key := OriginalRoute(d); key != o.RoutingKey {
					return Decision{Note: "routing key does not match"}
				}
			}
			for name, want := range o.Headers {
				if got, ok := HeaderString(d.Headers[name]); !ok || got != want {
					return Decision{Note: "header does not match"}
				}
			}
			return Decision{Move: true}
		},
		Rewrite: func(d *amqp.Delivery) amqp.Publishing {
			pub := Copy(d)
			pub.Headers = ReplayHeaders(d.Headers, now())
			for k := range d.Headers {
				if _, kept := pub.Headers[k]; !kept {
					reset[k] = true
				}
			}
			return pub
		},
	}
	if o.DryRun {
		dryRun(&p, o.Limit)
	}
	res, err := p.Run(ctx, conn)
	res.Target = target
	res.ResetHeaders = slices.Sorted(maps.Keys(reset))
	return res, err
}

// dryRun turns a moving pass into a read-only one (a peek, see Peek: on a
// quorum queue that is a requeue of the whole queue, in order) that notes
// the messages it would have moved, up to limit (0: no limit).
func dryRun(p *Pass, limit int) {
	decide, n := p.Decide, 0
	p.Target, p.MaxMoves, p.Rewrite = "", 0, nil
	p.Decide = func(pos int, d *amqp.Delivery) Decision {
		dec := decide(pos, d)
		switch {
		case !dec.Move:
			return dec
		case limit > 0 && n >= limit:
			return Decision{Note: "past the limit"}
		}
		n++
		return Decision{Note: NoteWouldMove}
	}
}

// ReplayHeaders returns the headers of a replayed message. Exactly the
// headers that would make it anything but a fresh retry cycle are
// dropped: contract.HeaderAttempt (the retry exchange routes on it),
// contract.HeaderDeadLetterReason (it is not dead any more) and the
// broker's dead-lettering headers (contract.DeathHeaders: an x-death that
// names the work queue would trip the broker's cycle detection). Every
// other header is kept, the first failure and last error included, so the
// history survives; contract.HeaderReplayCount is incremented (sweep
// counts it as a death) and contract.HeaderReplayedAt set to now.
func ReplayHeaders(h amqp.Table, now time.Time) amqp.Table {
	out := amqp.Table{}
	for k, v := range h {
		if !ReplayResets(k) {
			out[k] = v
		}
	}
	count, _ := parseCount(h[contract.HeaderReplayCount])
	out[contract.HeaderReplayCount] = strconv.FormatInt(count+1, 10)
	out[contract.HeaderReplayedAt] = now.UTC().Format(time.RFC3339Nano)
	return out
}

// ReplayResets reports whether replay drops header name (see
// ReplayHeaders).
func ReplayResets(name string) bool {
	return name == contract.HeaderAttempt || name == contract.HeaderDeadLetterReason || contract.DeathHeaders(name)
}

// SweepOptions configures a sweep.
type SweepOptions struct {
	// Pattern selects source queues by name (see Glob).
	Pattern string
	// MaxDeaths: a message whose death count (see ReadDeaths) exceeds it moves.
	MaxDeaths int64
	// To names the target queue; "{name}" stands for the source's name.
	To string
}

// SweepSource is one queue a sweep scans and where its messages go.
type SweepSource struct {
	Queue  Queue
	Target string
}

// PlanSweep picks the sources of a sweep from a vhost's queues. It refuses
// a target that is its own source, and one the pattern matches: a later
// sweep would move its messages again.
func PlanSweep(queues []Queue, o SweepOptions) ([]SweepSource, error) {
	if o.Pattern == "" {
		return nil, errors.New("a pattern is required")
	}
	if o.To == "" {
		return nil, errors.New("a target queue is required")
	}
	if o.MaxDeaths < 0 {
		return nil, fmt.Errorf("the death threshold must not be negative, got %d", o.MaxDeaths)
	}
	var out []SweepSource
	for _, q := range queues {
		if !Glob(o.Pattern, q.Name) {
			continue
		}
		target := SweepTarget(o.To, q.Name)
		switch {
		case target == q.Name:
			return nil, fmt.Errorf("target %q of queue %q is the queue itself", target, q.Name)
		case Glob(o.Pattern, target):
			return nil, fmt.Errorf("target %q of queue %q matches the pattern %q: the next sweep would move its messages again", target, q.Name, o.Pattern)
		}
		out = append(out, SweepSource{Queue: q, Target: target})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no queue matches the pattern %q", o.Pattern)
	}
	return out, nil
}

// CheckSweepTargets refuses a target that declared (the queues of the
// vhost the operator's specs declare) lacks, unless unmanaged allows it: a
// queue created by a sweep is one no plan shows and no apply looks after.
// A declared target must exist already among queues (rmqtopo apply creates
// it, with the spec's arguments), unless this is a dry run.
func CheckSweepTargets(sources []SweepSource, queues []Queue, declared map[string]bool, unmanaged, dryRun bool) error {
	exists := map[string]bool{}
	for _, q := range queues {
		exists[q.Name] = true
	}
	for _, src := range sources {
		switch {
		case declared[src.Target] && !exists[src.Target] && !dryRun:
			return fmt.Errorf("target %q is in the specs but not on the broker; run rmqtopo apply first", src.Target)
		case !declared[src.Target] && !unmanaged:
			return &UndeclaredTargetError{Target: src.Target, Queue: src.Queue.Name}
		}
	}
	return nil
}

// SweepTarget renders a target template for a source queue.
func SweepTarget(to, source string) string { return strings.ReplaceAll(to, "{name}", source) }

// SweepRun says how one source is swept.
type SweepRun struct {
	// MaxDeaths: a message whose CountDeaths total exceeds it moves.
	MaxDeaths int64
	Window    int
	Progress  func(Result)
	// CreateTarget declares a missing target (durable, classic); without
	// it a missing target is an error.
	CreateTarget bool
	// DryRun reads the source and counts what would move, declaring
	// nothing and moving nothing.
	DryRun bool
}

// SweepQueue moves the messages of one source whose death count (see
// CountDeaths) exceeds o.MaxDeaths to its target, with every header as it
// was. The others, and those whose x-death cannot be read, stay in place,
// in order.
func SweepQueue(ctx context.Context, conn *amqp.Connection, src SweepSource, o SweepRun) (Result, error) {
	var err error
	switch {
	case o.DryRun:
	case o.CreateTarget:
		err = ensureQueue(conn, src.Target)
	default:
		err = queueExists(conn, src.Target)
	}
	if err != nil {
		return Result{Queue: src.Queue.Name, Target: src.Target}, err
	}
	p := Pass{
		Queue: src.Queue.Name, Target: src.Target, Window: o.Window, Progress: o.Progress,
		InPlaceRequeue: InPlaceRequeue(src.Queue.Type),
		Decide: func(_ int, d *amqp.Delivery) Decision {
			deaths := CountDeaths(d, src.Queue.Name)
			switch {
			case deaths.Problem != "":
				return Decision{Note: NoteUnreadable}
			case deaths.Total() > o.MaxDeaths:
				return Decision{Move: true}
			}
			return Decision{Note: "at or below the threshold"}
		},
	}
	if o.DryRun {
		dryRun(&p, 0)
	}
	res, err := p.Run(ctx, conn)
	res.Target = src.Target
	return res, err
}

func queueExists(conn *amqp.Connection, name string) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("opening a channel: %w", err)
	}
	defer ch.Close()
	if _, err := ch.QueueDeclarePassive(name, false, false, false, false, nil); err != nil {
		return queueError(name, err)
	}
	return nil
}

// ensureQueue declares a missing target as a durable classic queue with no
// arguments: the simplest queue that keeps messages until an operator acts.
func ensureQueue(conn *amqp.Connection, name string) error {
	err := queueExists(conn, name)
	var nf *QueueNotFoundError
	if !errors.As(err, &nf) {
		return err
	}
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("opening a channel: %w", err)
	}
	defer ch.Close()
	if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.AccessRefused {
			return fmt.Errorf("declaring target queue %q refused: %s", name, ae.Reason)
		}
		return fmt.Errorf("declaring target queue %q: %w", name, err)
	}
	return nil
}
