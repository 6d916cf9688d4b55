package contract

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Wait-queue layouts, as ParseWaitQueue reports them.
const (
	WaitShared     = "shared"
	WaitPerAttempt = "per-attempt"
	WaitOutbox     = "outbox"
	WaitSpring     = "spring"
	// WaitLevels: a level queue of the levels layout (see Ladder).
	WaitLevels = "levels"
)

// WaitQueue is what the name of a wait queue says about it.
type WaitQueue struct {
	// Layout is one of WaitShared, WaitPerAttempt, WaitOutbox, WaitSpring,
	// WaitLevels.
	Layout string
	// Queue is the work queue the wait queue returns to, when its name
	// says (per-attempt and outbox); "" for vhost-wide wait queues.
	Queue string
	// Attempt is the retry the wait queue holds (per-attempt only).
	Attempt int
	// Delay is the wait, when the name spells one FormatDelay writes; 0
	// otherwise.
	Delay time.Duration
}

// OutboxDelayQueue names the outbox preset's delay queue "{q}.delay_{d}s".
func OutboxDelayQueue(queue string, delay time.Duration) string {
	return queue + ".delay_" + strconv.FormatInt(int64(delay/time.Second), 10) + "s"
}

// SpringWaitQueuePrefix is the Spring design's default WAIT_QUEUE_PREFIX.
const SpringWaitQueuePrefix = "wait-queue-"

// SpringWaitQueue names the spring preset's wait queue for one delay as the
// Spring design does: WAIT_QUEUE_PREFIX followed by the delay in
// milliseconds ("wait-queue-1000"), the same string its wait-for header and
// binding carry (SpringWaitFor).
func SpringWaitQueue(delay time.Duration) string {
	return SpringWaitQueueWithPrefix(SpringWaitQueuePrefix, delay)
}

// SpringWaitQueueWithPrefix is SpringWaitQueue for a WAIT_QUEUE_PREFIX of
// the service's choosing. ParseWaitQueue recognises the default prefix
// only.
func SpringWaitQueueWithPrefix(prefix string, delay time.Duration) string {
	return prefix + SpringWaitFor(delay)
}

// SpringWaitFor is the wait-for header value, and binding argument, of one
// delay in the Spring design: the delay in milliseconds as a decimal string
// (Long.toString), never a duration such as "1s".
func SpringWaitFor(delay time.Duration) string { return strconv.FormatInt(delay.Milliseconds(), 10) }

// GoQueue (github.com/bxcodec/goqueue, consumer/rabbitmq) names, as its
// consumer declares them.

// GoQueueRetryExchange names the topic exchange GoQueue publishes retries to.
func GoQueueRetryExchange(queue string) string { return queue + "__retry_exchange" }

// GoQueueRetryDLX names the fanout exchange GoQueue's retry queues
// dead-letter into; GoQueue binds the work queue to it with key "".
func GoQueueRetryDLX(queue string) string { return queue + "__retry_dlx" }

// GoQueueRetryQueue names GoQueue's retry queue n, which is also the
// routing key a retry n is published with.
func GoQueueRetryQueue(queue string, n int) string { return queue + "__retry." + strconv.Itoa(n) }

// ExhaustedQueue names the queue rmqtopo adds for a preset whose library
// drops a retry published past its last retry queue: the retry exchange's
// alternate exchange of the same name routes such a retry there, and the
// queue, whose policy gives it a TTL of 0, dead-letters it at once into
// queue's DLQ. The hop strips the per-message expiration the retry carries,
// which would otherwise expire it out of the DLQ.
func ExhaustedQueue(queue string) string { return queue + ".exhausted" }

// generatedSuffixes are the suffixes the contract appends to a work
// queue's name for the objects generated for it.
var generatedSuffixes = []string{
	RetryExchange(""), DeadLetterExchange(""), DeadLetterQueue(""), ParkingLotQueue(""),
	GoQueueRetryExchange(""), GoQueueRetryDLX(""), ExhaustedQueue(""),
}

var goqueueRetryQueue = regexp.MustCompile(`^(.+)__retry\.\d+$`)

// GeneratedFor returns the work queue an object named name was generated
// for, by the naming rules of the contract and the presets alone, or name
// itself when it follows none (a shared wait queue, a work queue).
func GeneratedFor(name string) string {
	if w, ok := ParseWaitQueue(name); ok && w.Queue != "" {
		return w.Queue
	}
	// The regexp only where it can match: it costs more than every other
	// test of a name together.
	if strings.Contains(name, "__retry.") {
		if m := goqueueRetryQueue.FindStringSubmatch(name); m != nil {
			return m[1]
		}
	}
	for _, s := range generatedSuffixes {
		if base, ok := strings.CutSuffix(name, s); ok && base != "" {
			return base
		}
	}
	return name
}

var (
	perAttemptWait = regexp.MustCompile(`^(.+)\.wait\.(\d+)\.(\d+(?:ms|s|m|h))$`)
	outboxDelay    = regexp.MustCompile(`^(.+)\.delay_(\d+)s$`)
	springWait     = regexp.MustCompile(`^` + regexp.QuoteMeta(SpringWaitQueuePrefix) + `(\d+)$`)
)

// ParseWaitQueue recognises the names rmqtopo gives wait queues: shared
// (SharedWaitQueue), per-attempt (PerAttemptWaitQueue), and those of the
// outbox (OutboxDelayQueue) and spring (SpringWaitQueue) presets, and the
// level queues of the levels layout (Ladder.LevelQueue). Every
// name that starts with SharedWaitQueuePrefix is a shared wait queue, even
// one whose delay does not parse, because rmqtopo reserves the prefix.
func ParseWaitQueue(name string) (WaitQueue, bool) {
	if rest, ok := strings.CutPrefix(name, SharedWaitQueuePrefix); ok {
		d, _ := ParseDelay(rest)
		return WaitQueue{Layout: WaitShared, Delay: d}, true
	}
	if l, k, err := ParseLevelQueue(name); err == nil {
		return WaitQueue{Layout: WaitLevels, Delay: l.TTL(k)}, true
	}
	// Each regexp runs only on names holding its literal part: every name
	// of a plan comes here, and the regexps cost most.
	if m := matchIf(perAttemptWait, name, strings.Contains(name, ".wait.")); m != nil {
		n, _ := strconv.Atoi(m[2])
		d, _ := ParseDelay(m[3])
		return WaitQueue{Layout: WaitPerAttempt, Queue: m[1], Attempt: n, Delay: d}, true
	}
	if m := matchIf(outboxDelay, name, strings.Contains(name, ".delay_")); m != nil {
		s, _ := strconv.ParseInt(m[2], 10, 64)
		return WaitQueue{Layout: WaitOutbox, Queue: m[1], Delay: time.Duration(s) * time.Second}, true
	}
	if m := matchIf(springWait, name, strings.HasPrefix(name, SpringWaitQueuePrefix)); m != nil {
		ms, err := strconv.ParseInt(m[1], 10, 64)
		var d time.Duration
		if err == nil && ms <= int64(1<<62)/int64(time.Millisecond) {
			d = time.Duration(ms) * time.Millisecond
		}
		return WaitQueue{Layout: WaitSpring, Delay: d}, true
	}
	return WaitQueue{}, false
}

// matchIf is re.FindStringSubmatch(name) when may, else nil.
func matchIf(re *regexp.Regexp, name string, may bool) []string {
	if !may {
		return nil
	}
	return re.FindStringSubmatch(name)
}

// IsWaitQueue reports whether name is one ParseWaitQueue recognises. A
// retired wait queue is kept until it has drained.
func IsWaitQueue(name string) bool {
	_, ok := ParseWaitQueue(name)
	return ok
}

// ParseDelay reads a delay as FormatDelay writes it: a whole number of
// ms, s, m or h.
func ParseDelay(s string) (time.Duration, bool) {
	units := []struct {
		suffix string
		unit   time.Duration
	}{{"ms", time.Millisecond}, {"s", time.Second}, {"m", time.Minute}, {"h", time.Hour}}
	for _, u := range units {
		digits, ok := strings.CutSuffix(s, u.suffix)
		if !ok || digits == "" {
			continue
		}
		n, err := strconv.ParseInt(digits, 10, 64)
		if err != nil || n < 0 || n > int64(1<<62)/int64(u.unit) {
			return 0, false
		}
		return time.Duration(n) * u.unit, true
	}
	return 0, false
}

// LockQueue is the exclusive queue an apply declares in every vhost it
// changes, on a connection held for the whole apply; rmqtopo never plans
// around it.
const LockQueue = "rmqtopo.lock"

// ManagedPolicyPrefix starts the name of every policy rmqtopo manages; a
// spec may not name a policy of its own so.
const ManagedPolicyPrefix = "rmqtopo."

// ManagedPolicyPriority is the priority of rmqtopo's policies. RabbitMQ
// applies one policy per object, the one of highest priority; user policies
// default to 0, so rmqtopo's win unless a user chooses otherwise, which the
// plan then reports.
const ManagedPolicyPriority = 100

// QueuePolicy names the rmqtopo policy that carries the mutable attributes
// (TTL, dead-lettering, limits) of one queue. One policy per queue, named
// after it, so that changing an attribute updates that policy in place.
func QueuePolicy(queue string) string { return ManagedPolicyPrefix + "queue." + queue }

// ExchangePolicy names the rmqtopo policy of one exchange.
func ExchangePolicy(exchange string) string { return ManagedPolicyPrefix + "exchange." + exchange }

// OutboxDelayPolicy names the rmqtopo policy of every outbox delay queue of
// queue, retired ones included (see OutboxDelayPattern).
func OutboxDelayPolicy(queue string) string { return ManagedPolicyPrefix + "outbox." + queue }

// OutboxDelayPattern matches the name of every outbox delay queue of queue,
// whatever its delay, so that a delay queue retired by a schedule change
// keeps its policy while it drains.
func OutboxDelayPattern(queue string) string {
	return "^" + regexp.QuoteMeta(queue) + `\.delay_[0-9]+s$`
}

// ExactPattern is a policy pattern that matches exactly the given names.
func ExactPattern(names ...string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = regexp.QuoteMeta(n)
	}
	if len(quoted) == 1 {
		return "^" + quoted[0] + "$"
	}
	return "^(" + strings.Join(quoted, "|") + ")$"
}

// IsManagedPolicy reports whether a policy name is one rmqtopo manages.
func IsManagedPolicy(name string) bool { return strings.HasPrefix(name, ManagedPolicyPrefix) }

// ManagedPolicyTarget names the object a managed policy belongs to: "queue"
// (QueuePolicy, OutboxDelayPolicy: the work queue) or "exchange"
// (ExchangePolicy), and its name; ok is false for any other name.
func ManagedPolicyTarget(policy string) (kind, name string, ok bool) {
	rest, found := strings.CutPrefix(policy, ManagedPolicyPrefix)
	if !found {
		return "", "", false
	}
	for _, p := range []struct{ prefix, kind string }{{"queue.", "queue"}, {"outbox.", "queue"}, {"exchange.", "exchange"}} {
		if n, ok := strings.CutPrefix(rest, p.prefix); ok && n != "" {
			return p.kind, n, true
		}
	}
	return "", "", false
}
