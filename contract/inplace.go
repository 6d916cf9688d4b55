package contract

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// The in-place shape of the native layout (rmqtopo's native queues from
// this release on). A queue's arguments are immutable, so a schedule kept
// in them (NativeArguments, the shape earlier rmqtopo made) can change
// only by replacing the queue. And a policy cannot override them: for
// delayed-retry-min, delayed-retry-max and delivery-limit RabbitMQ 4.3
// applies the lower of argument and policy (rabbit_quorum_queue), so a
// policy lowers what an argument sets but never raises it. So a native
// queue of the in-place shape carries in its arguments only what never
// changes: its type, its dead-lettering, and NativeMarker
// (x-delayed-retry-type: failed, which the broker reads with the
// policy's delayed-retry-min and -max; without a min it delays nothing:
// the modified route). Its schedule is in two places that change without
// touching the queue or a message it holds:
//
//   - for the broker, its own rmqtopo policy (QueuePolicy) carries
//     SchedulePolicy: delivery-limit, and on the reject route
//     delayed-retry-min and -max. A policy change reaches a live quorum
//     queue at once; a retry the queue already holds keeps the due time
//     computed when it came back (measured on 4.3.6), later failures
//     follow the new policy;
//   - for the helper, which reads over AMQP 1.0's management node, where
//     policies are not shown, the arguments of the queue's ScheduleBinding:
//     a binding from the vhost's internal ScheduleExchange to Q, key Q,
//     arguments ScheduleArguments (GET /bindings?src=..&dstq=Q&key=Q).
//     Nothing is published to that exchange; a binding costs the broker
//     nothing per policy, where an exchange of its own per queue would be
//     matched against every policy.
//
// A schedule change is then a policy update and a binding replaced by
// another (the plan adds the new one before it deletes the old one): the
// helper, reading both for a moment, keeps the schedule it has.
//
// A native queue on the modified route that has no policy of its own
// (its spec sets no attribute) takes a variant of this shape, the
// binding shape, which needs no policy: a policy per queue is what costs
// the broker the square of the queue count (spec's freshShape). On the
// modified route the broker computes no delay (the helper's modified
// outcome carries each retry's time), so the only part of the schedule
// the broker needs is the number of retries: the queue carries it in its
// arguments (NativeMarkerWithLimit), beside the marker, and the helper
// takes the rest from the ScheduleBinding, on the modified route whatever
// the delays (RouteOfArguments): without a policy's delayed-retry-min a
// basic.reject would be retried at once. A schedule change that keeps the
// number of retries is then one binding replaced, in place; one that
// changes it changes the queue's arguments, a replace.

// ScheduleExchange is the vhost's internal exchange whose bindings carry
// the schedules of native queues of the in-place shape.
const ScheduleExchange = "rmqtopo.schedules"

// NativeMarker returns the arguments that mark a quorum queue native in
// the in-place shape.
func NativeMarker() map[string]any {
	return map[string]any{ArgDelayedRetryType: DelayedRetryFailed}
}

// NativeMarkerWithLimit returns the arguments that mark a quorum queue
// native in the binding shape: the marker and its number of retries.
func NativeMarkerWithLimit(retries int) map[string]any {
	args := NativeMarker()
	args[ArgDeliveryLimit] = int64(retries)
	return args
}

// IsInPlace reports whether a queue's arguments are the in-place shape's
// (the marker, and no schedule) or the binding shape's (the same and its
// delivery limit): shapes whose schedule is apart from the arguments.
func IsInPlace(args map[string]any) bool {
	if args[ArgDelayedRetryType] != DelayedRetryFailed {
		return false
	}
	for _, k := range []string{ArgDelayedRetryMin, ArgDelayedRetryMax, ArgRetryDelays, ArgRetryJitter} {
		if _, ok := args[k]; ok {
			return false
		}
	}
	return true
}

// LimitInArguments returns the delivery limit of a native queue of the
// binding shape (IsInPlace, with its ArgDeliveryLimit), and false for
// every other queue.
func LimitInArguments(args map[string]any) (int, bool) {
	if !IsInPlace(args) {
		return 0, false
	}
	v, ok := args[ArgDeliveryLimit]
	if !ok {
		return 0, false
	}
	n, ok := argInt(v)
	return int(n), ok
}

// RouteOfArguments returns n, a schedule read from a ScheduleBinding,
// as it applies to the queue whose arguments are args: on the binding
// shape the modified route whatever the delays (the broker has no
// delayed-retry-min to delay a basic.reject), and an error when the
// binding's number of retries is not the arguments' delivery limit (a
// spec changes both together by replacing the queue).
func RouteOfArguments(args map[string]any, n Native) (Native, error) {
	limit, ok := LimitInArguments(args)
	if !ok {
		return n, nil
	}
	if limit != n.DeliveryLimit {
		return Native{}, fmt.Errorf("the schedule binding's %s does not match the queue's %s %d", count(n.DeliveryLimit, "retry", "retries"), ArgDeliveryLimit, limit)
	}
	n.Route = RouteModified
	return n, nil
}

// Policy keys of a native queue's schedule, in its own policy.
const (
	KeyDelayedRetryMin = "delayed-retry-min"
	KeyDelayedRetryMax = "delayed-retry-max"
)

// SchedulePolicy returns the policy keys that give a native queue of the
// in-place shape this schedule: its delivery limit (the number of
// retries) and, on the reject route, the broker's linear schedule.
func SchedulePolicy(delays []time.Duration, jitter bool) map[string]any {
	def := map[string]any{KeyDeliveryLimit: int64(len(delays))}
	if min, max, ok := BrokerExpressible(delays); ok && !jitter {
		def[KeyDelayedRetryMin] = min.Milliseconds()
		def[KeyDelayedRetryMax] = max.Milliseconds()
	}
	return def
}

// ScheduleKeys are the policy keys SchedulePolicy may write.
var ScheduleKeys = []string{KeyDeliveryLimit, KeyDelayedRetryMin, KeyDelayedRetryMax}

// ScheduleArguments returns the arguments of a native queue's
// ScheduleBinding: its delays (ArgRetryDelays) and jitter
// (ArgRetryJitter). The route follows from them as the broker's does from
// the policy: reject where BrokerExpressible and not jittered.
func ScheduleArguments(delays []time.Duration, jitter bool) map[string]any {
	words := make([]string, len(delays))
	for i, d := range delays {
		words[i] = FormatDelay(d)
	}
	args := map[string]any{ArgRetryDelays: strings.Join(words, ",")}
	if jitter {
		args[ArgRetryJitter] = JitterFull
	}
	return args
}

// ParseSchedule reads the arguments of a ScheduleBinding back into what
// a client needs of the queue.
func ParseSchedule(args map[string]any) (Native, error) {
	s, ok := args[ArgRetryDelays].(string)
	if !ok || s == "" {
		return Native{}, fmt.Errorf("the schedule binding has no %s", ArgRetryDelays)
	}
	n := Native{Jitter: args[ArgRetryJitter] == JitterFull}
	for _, w := range strings.Split(s, ",") {
		d, ok := ParseDelay(strings.TrimSpace(w))
		if !ok {
			return Native{}, fmt.Errorf("%s %q: delay %q does not parse", ArgRetryDelays, s, w)
		}
		n.Delays = append(n.Delays, d)
	}
	if len(n.Delays) >= MaxAttempt {
		return Native{}, fmt.Errorf("%s %q: %d retries, more than %d", ArgRetryDelays, s, len(n.Delays), MaxAttempt-1)
	}
	n.DeliveryLimit = len(n.Delays)
	n.Route = RouteModified
	if _, _, ok := BrokerExpressible(n.Delays); ok && !n.Jitter {
		n.Route = RouteReject
	}
	return n, nil
}

// NativeOf returns the schedule of a native queue of either shape: from
// its arguments (args), or, in the in-place shape, from the arguments of
// its ScheduleBinding (schedule; nil where it has none). It returns
// ErrNotNative for a queue that is not native.
func NativeOf(args, schedule map[string]any) (Native, error) {
	n, err := ParseNative(args)
	if !errors.Is(err, ErrScheduleApart) {
		return n, err
	}
	if schedule == nil {
		return Native{}, fmt.Errorf("%w, and it has none", err)
	}
	n, err = ParseSchedule(schedule)
	if err != nil {
		return Native{}, err
	}
	return RouteOfArguments(args, n)
}
