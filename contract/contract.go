// Package contract is the single written-down agreement between the topology
// that rmqtopo provisions and the services that fail messages through it
// (usually via the retry package).
//
// It depends on the standard library only, because services import it.
//
// # Routing
//
// For a work queue Q, rmqtopo provisions:
//
//   - RetryExchange(Q) = "Q.retry", a headers exchange. A service that fails a
//     delivery republishes it there with routing key Q (the work queue's own
//     name), mandatory=true, publisher confirms, and HeaderAttempt set to
//     the attempt number of the delivery the copy becomes, as a decimal
//     string ("2" for the first retry: the first delivery is attempt 1).
//     One binding per attempt routes it: immediate retries straight back to
//     Q, delayed retries to a TTL wait queue. The service never knows the
//     delays or the maximum.
//   - The retry exchange has no alternate-exchange. An attempt past the last
//     binding is unroutable, so the broker returns the mandatory copy
//     (basic.return, then basic.ack): that return is how the service learns
//     the schedule is exhausted. It then publishes the message to
//     DeadLetterExchange(Q) with HeaderDeadLetterReason = ReasonExhausted and
//     acks the original only once that copy is confirmed, so the message is
//     never lost between the two, and the service can report the outcome
//     truthfully. (Earlier rmqtopo versions gave the retry exchange the
//     alternate-exchange DeadLetterExchange(Q), so exhaustion reached the
//     DLQ without the service knowing.) A client that publishes to the
//     retry exchange without mandatory loses an exhausted message: the
//     contract requires mandatory.
//   - DeadLetterExchange(Q) = "Q.dlx", a fanout exchange bound to
//     DeadLetterQueue(Q) = "Q.dlq". Q itself dead-letters there, so broker
//     rejections, expiry and delivery-limit overflow also end in the DLQ.
//   - ParkingLotQueue(Q) = "Q.parking-lot", optional, fed only by operators.
//
// Wait queues carry a per-queue TTL (x-message-ttl) and dead-letter to the
// default exchange "". In the per-attempt layout each wait queue also names Q
// as its x-dead-letter-routing-key; in the shared layout the wait queue keeps
// the routing key the message was published with, which is why the retry
// publish MUST use Q as its routing key. Either way the message returns to
// exactly the queue it came from.
//
// # Why no message is dropped as a dead-letter cycle
//
// Broker-driven dead-lettering only ever goes from a wait queue back to Q
// (reason "expired"), or from Q to its DLQ. A message enters a wait queue only
// by a client publish, never by dead-lettering, and the client strips the
// broker's death headers (DeathHeaders) when it republishes. So when a wait
// queue expires a message into Q, its x-death names only that wait queue, and
// RabbitMQ's cycle rule (target queue already in x-death) never fires. A DLQ
// has no dead-letter exchange, so nothing leaves it except by an operator's
// confirmed move.
//
// # The native layout
//
// On RabbitMQ 4.3.1 and later a quorum work queue may delay its own
// retries (layout native): no retry exchange, no wait queue; the schedule
// and the settle route are in Q's own arguments. See NativeArguments,
// ParseNative and the comment at the top of native.go.
//
// # Headers
//
// Every header the contract owns starts with "rmqtopo-", never "x-": a
// headers exchange ignores x- headers when matching, and the x- namespace
// belongs to the broker. Values are AMQP long strings, because headers
// exchange matching is type-sensitive and a string survives every client.
package contract

import (
	"strconv"
	"strings"
	"time"
)

// Header names owned by the contract.
const (
	// HeaderAttempt is the attempt number of the delivery that carries it,
	// as a decimal string: 1 is the first delivery, 2 the first retry, as in
	// the seed systems (the outbox listener's x-delivery-count is "2" on the
	// first retry) and in `rmqtopo render -f schedule`. Absent on a first
	// delivery, which reads as 1. The retry exchange routes on it, so it must
	// be a string: a binding on "2" does not match integer 2.
	HeaderAttempt = "rmqtopo-attempt"
	// HeaderFirstFailure is the RFC 3339 time (UTC, nanoseconds) of the first
	// failure of the message.
	HeaderFirstFailure = "rmqtopo-first-failure"
	// HeaderLastError is the last handler error, truncated to MaxErrorBytes.
	HeaderLastError = "rmqtopo-last-error"
	// HeaderOriginalExchange and HeaderOriginalRoutingKey record where the
	// message was first published, before any retry rerouted it.
	HeaderOriginalExchange   = "rmqtopo-original-exchange"
	HeaderOriginalRoutingKey = "rmqtopo-original-routing-key"
	// HeaderDeadLetterReason says why a client sent the message to the DLQ
	// (one of the Reason* values). A message without it in a DLQ was
	// dead-lettered by the broker (see x-death), or, from a topology of an
	// older contract, exhausted its retries through the retry exchange's
	// alternate exchange.
	HeaderDeadLetterReason = "rmqtopo-dead-letter-reason"
	// HeaderReplayCount counts how many times an operator replayed the
	// message from a DLQ; HeaderReplayedAt is the time of the last replay.
	HeaderReplayCount = "rmqtopo-replay-count"
	HeaderReplayedAt  = "rmqtopo-replayed-at"
)

// Dead-letter reasons set by clients in HeaderDeadLetterReason.
const (
	ReasonRejected = "rejected" // the handler called the failure permanent
	// ReasonExhausted: the retry exchange returned the copy (no binding for
	// its attempt: the schedule is over), or the attempt would pass
	// MaxAttempt.
	ReasonExhausted = "exhausted"
	// ReasonUnroutable is no longer set: a retry copy the retry exchange
	// returns is exhausted. Kept so DLQ messages from older helpers read.
	ReasonUnroutable = "unroutable"
	// ReasonMalformedAttempt: the delivery's attempt header could not be
	// read, so no retry number can be trusted not to loop.
	ReasonMalformedAttempt = "malformed-attempt"
)

// MaxErrorBytes bounds HeaderLastError so that a header table never comes
// near the negotiated frame size (128 KiB by default, 4 KiB minimum).
const MaxErrorBytes = 1024

// DeathHeaders reports whether a header belongs to the broker's
// dead-lettering bookkeeping, or is one of its per-delivery counts
// (DeliveryHeaders), and must be stripped before a client republishes a
// message for another cycle (see the package doc on cycles).
func DeathHeaders(name string) bool {
	return name == "x-death" || strings.HasPrefix(name, "x-first-death-") ||
		strings.HasPrefix(name, "x-last-death-") || DeliveryHeaders(name)
}

// DeliveryHeaders reports whether a header is one the broker sets on each
// delivery from a quorum queue, counting that queue's deliveries of the
// message: x-delivery-count (failed deliveries; before RabbitMQ 4.3 every
// requeue) and x-acquired-count (every delivery, from 4.3). They describe
// a delivery, not the message, so no copy of a message carries them: the
// broker counts a copy afresh whatever it carries, yet shows a copied count
// as is on the copy's first delivery (and a copied x-acquired-count for
// ever on 3.x), which would misreport it (seen on 3.10.8, 4.0.5, 4.3.6).
func DeliveryHeaders(name string) bool {
	return name == "x-delivery-count" || name == "x-acquired-count"
}

// RetryExchange names the headers exchange a service publishes a failed
// delivery of queue to.
func RetryExchange(queue string) string { return queue + ".retry" }

// DeadLetterExchange names the fanout exchange in front of queue's DLQ.
func DeadLetterExchange(queue string) string { return queue + ".dlx" }

// DeadLetterQueue names queue's DLQ.
func DeadLetterQueue(queue string) string { return queue + ".dlq" }

// ParkingLotQueue names queue's parking lot.
func ParkingLotQueue(queue string) string { return queue + ".parking-lot" }

// PerAttemptWaitQueue names the wait queue of one retry of queue in the
// per-attempt layout. The delay is part of the name because a queue's TTL is
// immutable: a schedule change creates a new wait queue beside the old one,
// which drains into the work queue instead of being destroyed.
func PerAttemptWaitQueue(queue string, attempt int, delay time.Duration) string {
	return queue + ".wait." + strconv.Itoa(attempt) + "." + FormatDelay(delay)
}

// SharedWaitQueuePrefix starts the name of every shared wait queue.
const SharedWaitQueuePrefix = "rmqtopo.wait."

// SharedWaitQueue names the vhost-wide wait queue for one delay in the
// shared layout.
func SharedWaitQueue(delay time.Duration) string {
	return SharedWaitQueuePrefix + FormatDelay(delay)
}

// AttemptValue renders an attempt number as the header and binding value.
func AttemptValue(attempt int) string { return strconv.Itoa(attempt) }

// FirstAttempt is the attempt number of a first delivery, which carries no
// HeaderAttempt.
const FirstAttempt = 1

// ParseAttempt reads HeaderAttempt defensively. It returns FirstAttempt (1)
// for an absent header, and ok=false for a value that is not a number from
// 1 to MaxAttempt, written as a decimal string or read by Integer, so a
// malformed header can never make a message loop.
func ParseAttempt(v any) (attempt int, ok bool) {
	var n int64
	switch x := v.(type) {
	case nil:
		return FirstAttempt, true
	case string:
		p, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		if err != nil {
			return 0, false
		}
		n = p
	case []byte:
		return ParseAttempt(string(x))
	default:
		if n, ok = Integer(v); !ok {
			return 0, false
		}
	}
	if n < FirstAttempt || n > MaxAttempt {
		return 0, false
	}
	return int(n), true
}

// MaxAttempt is the largest attempt number the contract accepts. A spec
// cannot schedule more retries than this minus one.
const MaxAttempt = 1000

// FormatDelay renders a delay the way names and schedules show it: the
// largest whole unit among h, m, s and ms ("90s", "5m", "1500ms").
func FormatDelay(d time.Duration) string {
	ms := d.Milliseconds()
	switch {
	case ms%1000 != 0:
		return strconv.FormatInt(ms, 10) + "ms"
	case ms%3_600_000 == 0 && ms != 0:
		return strconv.FormatInt(ms/3_600_000, 10) + "h"
	case ms%60_000 == 0 && ms != 0:
		return strconv.FormatInt(ms/60_000, 10) + "m"
	default:
		return strconv.FormatInt(ms/1000, 10) + "s"
	}
}

// AttemptBindingArgs are the arguments of the retry exchange's binding
// that routes the copies becoming delivery attempt attempt (2 for the
// first retry).
func AttemptBindingArgs(attempt int) map[string]any {
	return map[string]any{"x-match": "all", HeaderAttempt: AttemptValue(attempt)}
}
