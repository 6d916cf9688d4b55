package ops

import (
	"fmt"
	"slices"

	"github.com/rmqtopo/rmqtopo/rabbitmq"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Queue is a queue as the operations need to know it, from the management
// API's listing: the caller fills it (ops never reads queue listings
// itself).
type Queue struct {
	Name string
	// Type is "classic", "quorum" or "stream".
	Type string
	// Ready is the queue's ready messages, by the broker's statistics.
	Ready int64
	// DeliveryLimits are the delivery limits given to a quorum queue, by
	// its x-delivery-limit argument and its policy's delivery-limit, as
	// given; what they make depends on the broker's version (see
	// CheckLeaveSafe).
	DeliveryLimits []int64
}

// MinDeliveryLimit is the lowest delivery limit of a quorum queue that ops
// leaves messages in: far above any count a read gives or a dead-letter
// brings along. rmqtopo's own DLQs and parking lots set 1,000,000
// (spec.DeadEndDeliveryLimit).
const MinDeliveryLimit = 1000

// judged is the profile ops judges release v by: its own, and for an
// unknown release the first that gives a queue without a limit one
// (4.0): there every requeue counts and such a queue has a limit, the
// strictest for the messages a pass leaves in place.
func judged(v topology.Version) rabbitmq.Profile {
	if p := rabbitmq.ProfileFor(v); p.Known() {
		return p
	}
	return rabbitmq.ProfileFor(rabbitmq.First(func(p rabbitmq.Profile) bool { return p.DefaultDeliveryLimit() > 0 }))
}

// CheckLeaveSafe refuses a quorum queue whose delivery limit could make
// the requeues of a pass lose messages. Every message a pass leaves in
// place is requeued (basic.nack), and past its limit a quorum queue
// dead-letters or drops a requeued message. Why a requeue can pass the
// limit depends on the broker's version v (its profile, see judged; an
// unknown version is judged like 4.0, the strictest):
//   - before 4.3, every requeue counts one delivery (seen on 3.10.8 and
//     4.0.5), and from 4.0 a queue with no limit has one of 20;
//   - from 4.3, basic.nack does not count (rabbitmq-server #15387; a lost
//     connection still does), but a message dead-lettered from a quorum
//     queue brings its delivery count along, so one that died of its
//     delivery limit arrives one past it (21 with the default), and
//     requeueing it drops it at once where the limit is lower (seen on
//     4.3.6: a peek of a DLQ with the default limit dropped it).
func CheckLeaveSafe(q Queue, v topology.Version) error {
	limit, limited := effectiveLimit(q, v)
	if !limited || limit >= MinDeliveryLimit {
		return nil
	}
	why := "every message rmqtopo reads and leaves in place counts one delivery, and past the limit the broker dead-letters or drops it"
	if judged(v).NackUncounted() {
		why = "a message dead-lettered from a quorum queue keeps its delivery count (one past that queue's limit when it died of it), and when rmqtopo puts a message whose count is past this queue's limit back in place, the broker dead-letters or drops it"
	}
	return fmt.Errorf("queue %q is a quorum queue with a delivery limit of %d: %s; raise it to at least %d (a policy with delivery-limit) first",
		q.Name, limit, why, MinDeliveryLimit)
}

// effectiveLimit is the delivery limit of queue q on a broker of version
// v, and false when it has none (other queue types have none). RabbitMQ
// takes the lower of the limits given; on 3.x any given limit counts, one
// below 1 dropping a message at its first requeue (seen on 3.10.8), while
// from 4.0 a negative one means no limit and loses to any other, and a
// queue given none has one of 20 (args_policy_lookup,
// rabbit_quorum_queue.erl; seen on 4.0.5). An unknown version is judged
// like 4.0.
func effectiveLimit(q Queue, v topology.Version) (int64, bool) {
	if q.Type != "quorum" {
		return 0, false
	}
	p := judged(v)
	limited, limit := false, int64(0)
	for _, n := range q.DeliveryLimits {
		if n < 0 && p.NegativeLimitIsNone() {
			continue
		}
		if !limited || n < limit {
			limited, limit = true, n
		}
	}
	switch {
	case limited:
		return limit, true
	case p.DefaultDeliveryLimit() == 0 || slices.ContainsFunc(q.DeliveryLimits, func(n int64) bool { return n < 0 }):
		return 0, false
	}
	return int64(p.DefaultDeliveryLimit()), true
}

// Glob reports whether name matches pattern, where * matches any run of
// characters (dots and slashes included) and ? any one character; every
// other character matches itself.
func Glob(pattern, name string) bool {
	p, n := []rune(pattern), []rune(name)
	// Iterative matching with backtracking to the last star: linear in
	// practice, never exponential.
	pi, ni, star, mark := 0, 0, -1, 0
	for ni < len(n) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == n[ni]):
			pi++
			ni++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, ni
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			ni = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// LookingIsDelivery says when reading a queue counts as a delivery of
// its messages: a quorum queue counts every delivery, requeued or not, in
// a header of each message it redelivers. Before RabbitMQ 4.3 that is
// x-delivery-count, towards the queue's delivery limit; from 4.3 it is
// x-acquired-count, and x-delivery-count grows only for failures
// (basic.reject, a lost connection), which a read is not (rabbitmq-server
// #15387; seen on 4.3.6). Classic queues count nothing.
func LookingIsDelivery(q Queue, v topology.Version) string {
	if q.Type != "quorum" {
		return ""
	}
	if judged(v).NackUncounted() {
		return fmt.Sprintf("note: %q is a quorum queue: reading it is a delivery, so each message read gets x-acquired-count one higher (x-delivery-count stays as it was)", q.Name)
	}
	limit := ""
	if n, limited := effectiveLimit(q, v); limited {
		limit = fmt.Sprintf(", towards its delivery limit of %d", n)
	}
	return fmt.Sprintf("note: %q is a quorum queue: reading it is a delivery, so each message read gets x-delivery-count one higher%s", q.Name, limit)
}
