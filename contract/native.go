package contract

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The native layout (RabbitMQ 4.3.1 and later).
//
// A work queue Q of the native layout is a quorum queue that delays its
// own retries: rmqtopo declares no retry exchange and no wait queue for
// it. Q keeps DeadLetterExchange(Q) (fanout, bound to DeadLetterQueue(Q))
// as its x-dead-letter-exchange, and its x-delivery-limit is the number of
// retries of its schedule: a message is delivered at most
// DeliveryLimit + 1 times, and the broker dead-letters it into the DLQ
// (x-death reason "delivery_limit") when the last attempt fails, as today
// the helper does with ReasonExhausted.
//
// This comment describes the earlier shape, whose schedule is in Q's own
// arguments; rmqtopo now makes native queues in the in-place shape (see
// inplace.go: the same routes and delays, with the schedule in Q's policy
// and in its schedule binding, so that it changes without replacing Q).
// The helper and the plan read both.
//
// Everything a client needs is in Q's own arguments, which ParseNative
// reads (a client reads them over AMQP 1.0's management node, GET
// /queues/{Q}, "arguments"; the management HTTP API shows the same). The
// arguments name one of two settle routes:
//
//   - RouteReject: the schedule is one the broker computes, min(Min ×
//     delivery-count, Max), so Q carries ArgDelayedRetryType
//     (DelayedRetryFailed), ArgDelayedRetryMin and ArgDelayedRetryMax. A
//     client retries a delivery with AMQP 0.9.1 basic.reject, requeue=true
//     (basic.nack does not count toward the delivery limit on 4.3 and is
//     not delayed by type "failed": never use it to retry), or AMQP 1.0
//     modified with delivery-failed=true. In this shape a change of
//     schedule changes Q's arguments: a migration.
//   - RouteModified: any other schedule (exponential, explicit delays,
//     jitter, immediate retries). Q carries ArgRetryDelays (and
//     ArgRetryJitter when the delays are drawn) and no x-delayed-retry-*
//     argument. A client retries a delivery over AMQP 1.0 with the modified
//     outcome, delivery-failed=true and the message annotation
//     AnnotationDeliveryTime = now + the delay of the attempt it becomes,
//     as Unix milliseconds (the broker then holds it until that time, ahead
//     of Q's backlog, and counts the delivery).
//
// A delay chosen per message (the helper's RetryAfter) needs the modified
// outcome with AnnotationDeliveryTime, which overrides the queue's own
// linear delay. So only the modified route honours it: on the reject route
// the helper consumes over AMQP 0.9.1, where basic.reject carries no time,
// and the queue's own delay applies (spec.Spec.TravelOf says which route a
// queue has; the helper logs it once per queue). A permanent failure goes to the DLQ at once, either by
// the client (publish to DeadLetterExchange(Q) with HeaderDeadLetterReason
// ReasonRejected, confirm, ack) or by AMQP 0.9.1 basic.reject
// requeue=false / AMQP 1.0 rejected, which the broker dead-letters
// at least once.
//
// The attempt number of a delivery is the broker's delivery count plus
// one (AttemptOfDeliveryCount): x-delivery-count is absent or 0 on the
// first delivery, attempt 1, as HeaderAttempt numbers it elsewhere. A
// message moved into a native queue from another broker with retries
// behind it (a blue-green upgrade, `rmqtopo upgrade move`: a retry of a
// wait queue, come due) carries HeaderAttempt, the attempt number of its
// first delivery here: the broker counts its deliveries afresh, so the
// attempt is HeaderAttempt plus the count (NativeAttempt), and its
// schedule goes on where it was, not from the start. A message published
// by a service carries none.

// Queue arguments of the native layout.
const (
	// ArgDelayedRetryType is RabbitMQ 4.3's delayed-retry mode of a quorum
	// queue; rmqtopo writes DelayedRetryFailed on the reject route.
	ArgDelayedRetryType = "x-delayed-retry-type"
	// ArgDelayedRetryMin and ArgDelayedRetryMax are the linear step and
	// the cap, in milliseconds: the broker delays a returned message by
	// min(Min × delivery-count, Max).
	ArgDelayedRetryMin = "x-delayed-retry-min"
	ArgDelayedRetryMax = "x-delayed-retry-max"
	// ArgDeliveryLimit is the quorum queue's delivery limit: the number of
	// retries of a native queue.
	ArgDeliveryLimit = "x-delivery-limit"
	// ArgRetryDelays is the schedule of the modified route: the delay of
	// each retry in order, FormatDelay each, comma-separated ("1s,2s,4s";
	// "0ms" for an immediate retry). It is rmqtopo's, not the broker's:
	// the broker stores it and does nothing with it.
	ArgRetryDelays = "x-rmqtopo-retry-delays"
	// ArgRetryJitter is JitterFull when each delay is drawn uniformly
	// between 0 and the delay of ArgRetryDelays; absent otherwise.
	ArgRetryJitter = "x-rmqtopo-retry-jitter"
)

// Values of the native layout's arguments and annotations.
const (
	// DelayedRetryFailed delays the returns that raise the delivery count:
	// AMQP 0.9.1 basic.reject, AMQP 1.0 modified with delivery-failed, a
	// lost connection.
	DelayedRetryFailed = "failed"
	// JitterFull: see ArgRetryJitter.
	JitterFull = "full"
	// AnnotationDeliveryTime is the AMQP 1.0 message annotation of a
	// modified outcome that holds the message until that Unix time in
	// milliseconds.
	AnnotationDeliveryTime = "x-opt-delivery-time"
	// AnnotationFirstFailure is the message annotation a client adds to
	// a native queue's message on the modified route when it fails the
	// first time: HeaderFirstFailure's value, which the broker keeps on
	// the message for its later deliveries (annotations starting "x-" may
	// be modified, AMQP 1.0 3.2.10; rabbit_amqp_session:
	// settle_op_from_outcome/1), so that its DLQ copy says when it first
	// failed. A basic.reject (the reject route) carries nothing.
	AnnotationFirstFailure = "x-rmqtopo-first-failure"
	// HeaderDeliveryCount is the broker's count of earlier failed
	// deliveries, on AMQP 0.9.1 deliveries from a quorum queue.
	HeaderDeliveryCount = "x-delivery-count"
)

// SettleRoute is how a client retries a delivery of a native queue.
type SettleRoute string

const (
	// RouteReject: AMQP 0.9.1 basic.reject with requeue; the queue's
	// x-delayed-retry-* arguments delay it.
	RouteReject SettleRoute = "reject"
	// RouteModified: AMQP 1.0 modified, delivery-failed, with
	// AnnotationDeliveryTime.
	RouteModified SettleRoute = "modified"
)

// Native is what a client needs to know of a native queue.
type Native struct {
	Route SettleRoute
	// Delays is the delay before each retry, in order: Delays[0] is the
	// wait before attempt 2. len(Delays) == DeliveryLimit.
	Delays []time.Duration
	// Jitter: each delay is drawn uniformly between 0 and Delays[i].
	Jitter bool
	// DeliveryLimit is the queue's x-delivery-limit: the number of retries.
	DeliveryLimit int
}

// Delay returns the delay before the given attempt (2 for the first
// retry), and false past the schedule (the broker dead-letters it).
func (n Native) Delay(attempt int) (time.Duration, bool) {
	i := attempt - 2
	if i < 0 || i >= len(n.Delays) {
		return 0, false
	}
	return n.Delays[i], true
}

// NativeAttempt is the attempt number of a delivery of a native queue:
// its HeaderAttempt (header; the attempt of the message's first delivery
// from this queue, FirstAttempt when absent) plus the broker's delivery
// count. A malformed HeaderAttempt reads as absent: the broker's
// delivery limit still ends the schedule.
func NativeAttempt(header any, count int64) int {
	base, ok := ParseAttempt(header)
	if !ok {
		base = FirstAttempt
	}
	return min(AttemptOfDeliveryCount(count)+base-FirstAttempt, MaxAttempt)
}

// AttemptOfDeliveryCount turns the broker's delivery count (the
// HeaderDeliveryCount header, or the AMQP 1.0 header's delivery-count; 0
// or absent on a first delivery) into the attempt number.
func AttemptOfDeliveryCount(count int64) int {
	if count < 0 {
		count = 0
	}
	if count >= MaxAttempt {
		return MaxAttempt
	}
	return int(count) + 1
}

// BrokerExpressible reports whether delays is a schedule the broker
// computes itself, min(min × n, max) for the n-th retry, and returns min
// and max: the first delay is the step, and each later one is the next
// multiple of it up to a cap that then repeats (fixed, linear, linear
// capped). A zero delay (an immediate retry) is not: the broker's delay
// is at least its min.
func BrokerExpressible(delays []time.Duration) (min, max time.Duration, ok bool) {
	if len(delays) == 0 || delays[0] <= 0 || delays[0]%time.Millisecond != 0 {
		return 0, 0, false
	}
	min, max = delays[0], delays[len(delays)-1]
	for i, d := range delays {
		if d != time.Duration(minInt(int64(i+1)*int64(min), int64(max))) {
			return 0, 0, false
		}
	}
	return min, max, true
}

// NativeArguments returns the queue arguments, beyond the type and the
// dead-lettering, that make a quorum queue native with this schedule:
// the reject route where the broker can express delays (and no jitter),
// else the modified route.
func NativeArguments(delays []time.Duration, jitter bool) map[string]any {
	args := map[string]any{ArgDeliveryLimit: int64(len(delays))}
	if min, max, ok := BrokerExpressible(delays); ok && !jitter {
		args[ArgDelayedRetryType] = DelayedRetryFailed
		args[ArgDelayedRetryMin] = min.Milliseconds()
		args[ArgDelayedRetryMax] = max.Milliseconds()
		return args
	}
	words := make([]string, len(delays))
	for i, d := range delays {
		words[i] = FormatDelay(d)
	}
	args[ArgRetryDelays] = strings.Join(words, ",")
	if jitter {
		args[ArgRetryJitter] = JitterFull
	}
	return args
}

// ErrNotNative is ParseNative's answer for a queue without the native
// layout's arguments.
var ErrNotNative = errors.New("not a native queue")

// ErrScheduleApart is ParseNative's answer for a native queue of the
// in-place shape: its arguments say only that it is native, and its
// schedule is in its ScheduleBinding (ParseSchedule) and its policy.
var ErrScheduleApart = errors.New("native queue whose schedule is in its schedule binding")

// IsNative reports whether a queue's arguments make it a native queue
// of either shape that a client can read.
func IsNative(args map[string]any) bool {
	_, err := ParseNative(args)
	return err == nil || errors.Is(err, ErrScheduleApart)
}

// ParseNative reads a queue's arguments, as the broker reports them
// (numbers may come as int, int64 or float64), back into what a client
// needs. It returns ErrNotNative for a queue that is not native, and
// another error for arguments that name the layout but cannot be read.
func ParseNative(args map[string]any) (Native, error) {
	limit, hasLimit := argInt(args[ArgDeliveryLimit])
	if s, ok := args[ArgRetryDelays].(string); ok {
		n := Native{Route: RouteModified, Jitter: args[ArgRetryJitter] == JitterFull}
		for _, w := range strings.Split(s, ",") {
			d, ok := ParseDelay(strings.TrimSpace(w))
			if !ok {
				return Native{}, fmt.Errorf("%s %q: delay %q does not parse", ArgRetryDelays, s, w)
			}
			n.Delays = append(n.Delays, d)
		}
		n.DeliveryLimit = len(n.Delays)
		if hasLimit && limit != int64(len(n.Delays)) {
			return Native{}, fmt.Errorf("%s %d does not match the %s of %s", ArgDeliveryLimit, limit, count(len(n.Delays), "delay", "delays"), ArgRetryDelays)
		}
		return n, nil
	}
	typ, _ := args[ArgDelayedRetryType].(string)
	if typ == "" || typ == "disabled" {
		return Native{}, ErrNotNative
	}
	if IsInPlace(args) {
		return Native{}, ErrScheduleApart
	}
	min, okMin := argInt(args[ArgDelayedRetryMin])
	max, okMax := argInt(args[ArgDelayedRetryMax])
	if !okMax {
		max, okMax = min, okMin
	}
	switch {
	case !okMin || min <= 0 || max < min:
		return Native{}, fmt.Errorf("%s %q needs a positive %s (and %s not below it)", ArgDelayedRetryType, typ, ArgDelayedRetryMin, ArgDelayedRetryMax)
	case !hasLimit || limit < 0 || limit >= MaxAttempt:
		return Native{}, fmt.Errorf("%s %q needs %s from 0 to %d", ArgDelayedRetryType, typ, ArgDeliveryLimit, MaxAttempt-1)
	}
	n := Native{Route: RouteReject, DeliveryLimit: int(limit)}
	for k := int64(1); k <= limit; k++ {
		n.Delays = append(n.Delays, time.Duration(minInt(min*k, max))*time.Millisecond)
	}
	return n, nil
}

func minInt(a, b int64) int64 {
	if a < b {
		return a
	}
	return b
}

// argInt reads an integer argument, which may have come through JSON: a
// JSONInteger, or a decimal string.
func argInt(v any) (int64, bool) {
	if s, ok := v.(string); ok {
		n, err := strconv.ParseInt(s, 10, 64)
		return n, err == nil
	}
	return JSONInteger(v)
}
