// Package bluegreen carries out a blue-green upgrade's move (issue 42,
// docs/upgrades.md): every message of a spec's queues leaves the old
// (blue) broker for the new (green) one, where the same spec was applied
// for green's release, without losing one, rushing a retry or restarting
// its schedule.
//
// It moves by place, and lets each broker do what it does best:
//
//   - a work queue's backlog, a return queue's retries (due already), a
//     DLQ's and a parking lot's dead letters move through one dynamic
//     shovel each (rabbitmq_shovel), declared on green, from blue's queue
//     to green's queue of the spec: in order, acknowledged on blue only
//     once green confirmed them, every header and property kept as it is
//     (x-death, rmqtopo-*), and run by the broker, so that it goes on
//     whatever becomes of rmqtopo's process;
//   - a retry waiting in a wait queue (or a level queue, or a preset's
//     delay queue) stays where it is until blue's own TTL expires it,
//     at the time it was due, into its work queue or return queue, from
//     where the shovel moves it on at once. It carries its attempt number
//     (contract.HeaderAttempt), which a green wait-queue layout routes on
//     as before and a green native queue goes on from
//     (contract.NativeAttempt): it comes back on green no earlier than due,
//     at its attempt, and its schedule goes on.
//
// A wait queue's due times are therefore never computed: the broker that
// holds a retry releases it. The move is over when every queue of the
// spec on blue has stayed empty for a while (Options.Quiet).
package bluegreen

import (
	"fmt"
	"slices"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Route is one shovel: messages of queue From on blue go to queue To on
// green, in vhost Vhost on both.
type Route struct {
	Vhost, From, To string
}

// Layout is what the move does with the queues of a spec on blue.
type Layout struct {
	// Routes are shovelled.
	Routes []Route
	// Waiting are the queues whose messages wait for their time (wait,
	// level and delay queues): they leave by themselves, through a
	// queue of Routes.
	Waiting []Queue
}

// Queue is one queue of blue.
type Queue struct{ Vhost, Name string }

// Watched are all the queues of the layout on blue: every one must be
// empty before the move is over.
func (l Layout) Watched() []Queue {
	var out []Queue
	for _, r := range l.Routes {
		out = append(out, Queue{r.Vhost, r.From})
	}
	return append(out, l.Waiting...)
}

// Plan lays out the move of files's queues, resolved for blue (the
// files' layouts as spec.Resolve chose them for blue), from blue's
// expansion of the spec to green's live topology: a work queue, its
// return queue and every other queue that holds messages until someone
// takes them go to green's queue of the same name (a return queue's to
// its work queue); a wait queue is left to drain. A queue that green
// lacks is an error: the spec must be applied on green first.
func Plan(files []*spec.File, blue topology.Topology, green topology.Topology) (Layout, error) {
	onGreen := map[Queue]bool{}
	for _, q := range green.Queues {
		onGreen[Queue{q.Vhost, q.Name}] = true
	}
	returns := map[Queue]string{}
	work := map[Queue]bool{}
	for _, f := range files {
		for _, q := range f.Spec.Queues {
			work[Queue{f.Spec.Vhost, q.Name}] = true
			if back := spec.ReturnTo(q); back != q.Name {
				returns[Queue{f.Spec.Vhost, back}] = q.Name
			}
		}
	}
	var l Layout
	var missing []string
	for _, q := range blue.Queues {
		at := Queue{q.Vhost, q.Name}
		to, isReturn := returns[at]
		switch {
		case isReturn:
		case contract.IsWaitQueue(q.Name) || (!work[at] && timed(q)):
			l.Waiting = append(l.Waiting, at)
			continue
		default:
			to = q.Name
		}
		if !onGreen[Queue{q.Vhost, to}] {
			missing = append(missing, fmt.Sprintf("%q (vhost %q)", to, q.Vhost))
			continue
		}
		l.Routes = append(l.Routes, Route{Vhost: q.Vhost, From: q.Name, To: to})
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return Layout{}, fmt.Errorf("green has no queue %s of the spec: apply the spec on green first", joinNames(missing))
	}
	return l, nil
}

func joinNames(names []string) string {
	if len(names) > 5 {
		return fmt.Sprintf("%s and %d more", joinNames(names[:5]), len(names)-5)
	}
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}

// ShovelName is the name of the shovel of route r, in r's vhost on green.
func ShovelName(r Route) string { return "rmqtopo-upgrade." + r.From }

// timed reports whether q expires its messages into another queue (a
// TTL and a dead-letter exchange): a preset's delay queue that
// contract.IsWaitQueue does not name (GoQueue's retry queues).
func timed(q topology.Queue) bool {
	_, ttl := q.Arguments["x-message-ttl"]
	_, dlx := q.Arguments["x-dead-letter-exchange"]
	return ttl && dlx
}
