package ops

import "fmt"

// Queue is a queue as the operations need to know it, from the management
// API's listing: the caller fills it (ops never reads queue listings
// itself).
type Queue struct {
	Name string
	// Type is "classic", "quorum" or "stream".
	Type string
	// Ready is the queue's ready messages, by the broker's statistics.
	Ready int64
	// DeliveryLimit is a quorum queue's delivery limit, the lower of its
	// x-delivery-limit argument and its policy's, or 0 for none given.
	DeliveryLimit int64
}

// MinDeliveryLimit is the lowest delivery limit of a quorum queue that ops
// leaves messages in. Every message a pass leaves in place is requeued,
// which counts one delivery; past its limit a quorum queue dead-letters or
// drops the message. rmqtopo's own DLQs set 1,000,000.
const MinDeliveryLimit = 1000

// CheckLeaveSafe refuses a quorum queue whose delivery limit could make
// requeues lose messages. brokerMajor is the broker's major version: since
// 4.0 a quorum queue without a limit has one of 20.
func CheckLeaveSafe(q Queue, brokerMajor int) error {
	if q.Type != "quorum" {
		return nil
	}
	limit := q.DeliveryLimit
	if limit == 0 && brokerMajor >= 4 {
		limit = 20
	}
	if limit == 0 || limit >= MinDeliveryLimit {
		return nil
	}
	return fmt.Errorf("queue %q is a quorum queue with a delivery limit of %d: every message rmqtopo reads and leaves in place counts one delivery, and past the limit the broker dead-letters or drops it; raise it to at least %d (a policy with delivery-limit) first",
		q.Name, limit, MinDeliveryLimit)
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

// LookingIsDelivery says when reading a queue counts as a delivery: a
// quorum queue counts every delivery of a message, requeued or not, in
// its x-delivery-count and against its delivery limit. Classic queues
// count nothing.
func LookingIsDelivery(q Queue) string {
	if q.Type != "quorum" {
		return ""
	}
	limit := ""
	if n := q.DeliveryLimit; n > 0 {
		limit = fmt.Sprintf(", towards its delivery limit of %d", n)
	}
	return fmt.Sprintf("note: %q is a quorum queue: reading it is a delivery, so each message read gets x-delivery-count one higher%s", q.Name, limit)
}
