package spec

import (
	"fmt"
	"time"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/english"
)

// Travel is how a queue's delayed retries travel and whether the retry
// helper honours a handler's RetryAfter there. Which it is follows from
// the layout, the return queue and, on the native layout, the schedule's
// shape: the schedule renderer and the plan say it per queue, so that a
// user learns it before a retry comes back at a time it did not ask for.
type Travel struct {
	// Route says in words where a delayed retry waits and how it comes
	// back.
	Route string
	// RetryAfter is RetryAfterHonoured, RetryAfterIgnored or
	// RetryAfterNotApplicable.
	RetryAfter string
	// Why, when not empty, says what sets the delay instead, or a limit
	// of the one honoured.
	Why string
	// Others, when not empty, says what a consumer that is not
	// retry.Consume sees of the retries: set where a return queue holds
	// them for Consume (othersLate).
	Others string
}

// Values of Travel.RetryAfter.
const (
	RetryAfterHonoured      = "honoured"
	RetryAfterIgnored       = "not honoured"
	RetryAfterNotApplicable = "does not apply"
)

// String is the one line: "retries travel: ...; RetryAfter: ...".
func (t Travel) String() string {
	s := "retries travel: " + t.Route + "; RetryAfter: " + t.RetryAfter
	if t.Why != "" {
		s += " (" + t.Why + ")"
	}
	return s
}

// Honoured reports whether a handler's RetryAfter sets the delay.
func (t Travel) Honoured() bool { return t.RetryAfter == RetryAfterHonoured }

// waitQueueTTL is why a wait queue's retry ignores a RetryAfter: the
// helper publishes to the wait queue, whose TTL alone decides.
const waitQueueTTL = "a wait queue's TTL sets the delay; layout levels or native honours it"

// TravelOf says how q's retries travel, for the layout it resolves to
// (LayoutOf; call after Resolve to judge it for a broker).
func (s *Spec) TravelOf(q Queue) Travel {
	t := s.travelOf(q)
	if t.RetryAfter != RetryAfterNotApplicable && ReturnTo(q) != q.Name {
		t.Others = othersLate(q)
	}
	return t
}

// othersLate says what a consumer that is not retry.Consume sees of the
// retries of q, whose return queue holds each for Consume up to
// contract.ReturnQueueHandover before it moves on into q: on a release
// with quorum message priorities it moves on at the retry priority, ahead
// of q's backlog; elsewhere to the back of q.
func othersLate(q Queue) string {
	where := "behind the backlog of " + q.Name
	if q.res.priorities {
		where = "ahead of the backlog of " + q.Name + " (message priority)"
	}
	return fmt.Sprintf("a consumer that is not retry.Consume (another language, a loop of its own, a Delayer target read directly) gets each retry %s after its delay, %s; it can consume %s ahead of %s to get them on time",
		contract.FormatDelay(contract.ReturnQueueHandover), where, ReturnTo(q), q.Name)
}

// travelOf is TravelOf but for Others.
func (s *Spec) travelOf(q Queue) Travel {
	delays := q.Retry.Delays()
	switch {
	case q.Preset != PresetNone:
		return Travel{Route: fmt.Sprintf("wait queues of the %s preset, as its library publishes them", q.Preset),
			RetryAfter: RetryAfterNotApplicable, Why: "the retry helper does not consume a preset's queue"}
	case q.ImmediateRetries+len(delays) == 0:
		return Travel{Route: "none, a failure goes to " + s.deadEnd(q), RetryAfter: RetryAfterNotApplicable}
	}
	switch s.layoutOf(q) {
	case LayoutNative:
		return nativeTravel(q)
	case LayoutLevels:
		return s.levelsTravel(q, delays)
	case LayoutPerAttempt:
		return waitTravel(q, delays, ReturnTo(q)+".wait.{n}.{delay}, one per retry")
	}
	return waitTravel(q, delays, contract.SharedWaitQueuePrefix+"{delay}, shared by delay")
}

// waitTravel is the route through wait queues named as names says, and
// back through q's return queue if it has one.
func waitTravel(q Queue, delays []time.Duration, names string) Travel {
	if len(delays) == 0 {
		return Travel{Route: "back into " + q.Name + " at once (immediate retries only)",
			RetryAfter: RetryAfterIgnored, Why: "an immediate retry comes back at once"}
	}
	return Travel{Route: "wait queues " + names + backThrough(q), RetryAfter: RetryAfterIgnored, Why: waitQueueTTL}
}

// backThrough names q's return queue, through which its delayed retries
// come back, if it has one; else, where the release has quorum message
// priorities, says that they come back ahead of q's backlog by priority.
func backThrough(q Queue) string {
	if back := ReturnTo(q); back != q.Name {
		return ", back through the return queue " + back
	}
	if q.res.priorities {
		return fmt.Sprintf(", back into %s at message priority %d, ahead of its backlog to every consumer", q.Name, contract.RetryPriority)
	}
	return ""
}

// levelsTravel is the route through the vhost's delay ladder, where the
// helper picks each delay; the retry exchange sends immediate retries
// straight back, whatever the helper asks.
func (s *Spec) levelsTravel(q Queue, delays []time.Duration) Travel {
	l, _ := s.Ladder()
	t := Travel{Route: "the delay ladder " + l.EntryExchange() + ", any delay per message" + backThrough(q),
		RetryAfter: RetryAfterHonoured, Why: "up to " + l.MaxDelay().String() + ", with retry.WithLevels"}
	if len(delays) == 0 {
		return waitTravel(q, nil, "")
	}
	if q.ImmediateRetries > 0 {
		t.Why += "; not on the " + english.Count(q.ImmediateRetries, "immediate retry, which comes", "immediate retries, which come") + " back at once"
	}
	return t
}

// nativeTravel is the route of a native queue, which holds its retries
// itself: by basic.reject where the broker computes the schedule (the
// helper consumes over AMQP 0.9.1 and can ask for no other delay), else
// over AMQP 1.0 with a delivery time the helper chooses.
func nativeTravel(q Queue) Travel {
	const held = "held by the broker inside the queue (native, "
	minD, maxD, _ := contract.BrokerExpressible(NativeDelays(q))
	if NativeRoute(q) == contract.RouteModified {
		return Travel{Route: held + "AMQP 1.0 modified with a delivery time)", RetryAfter: RetryAfterHonoured}
	}
	steps := "linear " + contract.FormatDelay(minD) + " steps up to " + contract.FormatDelay(maxD)
	if minD == maxD {
		steps = contract.FormatDelay(minD) + " each"
	}
	return Travel{Route: held + "basic.reject: " + steps + ")", RetryAfter: RetryAfterIgnored,
		Why: "the queue's own delay applies; a schedule that is not linear, or jitter, takes the AMQP 1.0 route, which honours it"}
}
