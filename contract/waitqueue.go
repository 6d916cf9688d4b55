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

// SpringWaitQueue names the spring preset's wait queue for one delay.
func SpringWaitQueue(delay time.Duration) string { return "wait-queue-" + FormatDelay(delay) }

var (
	perAttemptWait = regexp.MustCompile(`^(.+)\.wait\.(\d+)\.(\d+(?:ms|s|m|h))$`)
	outboxDelay    = regexp.MustCompile(`^(.+)\.delay_(\d+)s$`)
	springWait     = regexp.MustCompile(`^wait-queue-(\d+(?:ms|s|m|h))$`)
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
	if m := perAttemptWait.FindStringSubmatch(name); m != nil {
		n, _ := strconv.Atoi(m[2])
		d, _ := ParseDelay(m[3])
		return WaitQueue{Layout: WaitPerAttempt, Queue: m[1], Attempt: n, Delay: d}, true
	}
	if m := outboxDelay.FindStringSubmatch(name); m != nil {
		s, _ := strconv.ParseInt(m[2], 10, 64)
		return WaitQueue{Layout: WaitOutbox, Queue: m[1], Delay: time.Duration(s) * time.Second}, true
	}
	if m := springWait.FindStringSubmatch(name); m != nil {
		d, _ := ParseDelay(m[1])
		return WaitQueue{Layout: WaitSpring, Delay: d}, true
	}
	return WaitQueue{}, false
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
