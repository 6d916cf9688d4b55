package contract

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The levels layout: arbitrary per-message delays through a handful of
// shared queues.
//
// A Ladder of N levels with resolution r has one queue per level k
// (0 ≤ k < N) with the fixed TTL r×2^k. A delay d is rounded up to
// s = ⌈d/r⌉ steps, and the bits of s are written into the routing key, most
// significant first, one word "0" or "1" per level, before the destination
// queue's name:
//
//	b(N-1) . … . b1 . b0 . destination
//
// Stage exchange k (a topic exchange, 1 ≤ k ≤ N) routes a message to the
// highest level below k whose bit is 1, or, when bits k-1..0 are all 0, to
// the delivery exchange; it looks only at those bits. Level k's queue
// dead-letters into stage k when its TTL expires, keeping the routing key.
// The entry is stage N; the delivery exchange routes on the destination
// words, skipping the N bit words, to the destination queue.
//
// So a message waits in each level whose bit is 1, once, for exactly the
// sum s×r, passing one exchange per level it waits in (plus the delivery
// exchange), and only ever moves to lower levels: its x-death can never
// name the queue it is dead-lettered into, and RabbitMQ's dead-letter cycle
// rule never fires. Each level has a single TTL, so its FIFO order is
// expiry order: no message waits behind a longer one (no head-of-line
// blocking). A delay is never shortened: lateness is below r plus the
// broker's latency per level passed.
//
// A first design chained one exchange per bit (stage k looked at bit k
// only and passed a 0 on to stage k-1 by an exchange-to-exchange binding):
// fewer bindings, but every publish and every dead-lettering crossed all
// the stages below, and on RabbitMQ 3.10 each topic exchange crossed costs
// about 0.15 ms of the broker's CPU; a 10,000-message burst through 9
// levels was seconds late.
//
// The delivery exchange's alternate exchange is the ladder's dead-letter
// exchange (fanout) bound to its DLQ: a message for a destination that is
// not bound ends there instead of being dropped, or, with at-least-once
// dead-lettering, held in a level queue forever.

// LevelsPrefix starts the name of every object of a ladder.
const LevelsPrefix = "rmqtopo.levels."

// MaxLevels bounds a ladder: 2^40 ms is 35 years, beyond RabbitMQ's 10 year
// TTL cap.
const MaxLevels = 40

// Ladder is one set of delay levels.
type Ladder struct {
	// Resolution is the TTL of level 0 and the unit delays are rounded up
	// to; a whole number of milliseconds.
	Resolution time.Duration
	// Levels is the number of levels, N.
	Levels int
}

// NewLadder returns the smallest ladder of the given resolution that can
// delay a message by max: N = ⌈log2(max/resolution + 1)⌉ levels, at least 1.
func NewLadder(resolution, max time.Duration) (Ladder, error) {
	switch {
	case resolution <= 0 || resolution%time.Millisecond != 0:
		return Ladder{}, fmt.Errorf("levels resolution %s is not a positive whole number of milliseconds", resolution)
	case max < resolution:
		return Ladder{}, fmt.Errorf("levels max %s is below the resolution %s", max, resolution)
	}
	steps := (max + resolution - 1) / resolution // ⌈max/r⌉
	n := bits.Len64(uint64(steps))               // smallest n with 2^n - 1 ≥ steps
	l := Ladder{Resolution: resolution, Levels: n}
	if !l.fits() {
		return Ladder{}, fmt.Errorf("levels max %s at resolution %s needs %d levels; at most %d", max, resolution, n, MaxLevels)
	}
	return l, nil
}

// fits reports whether every delay of the ladder is a time.Duration.
func (l Ladder) fits() bool {
	return l.Levels >= 1 && l.Levels <= MaxLevels && l.Resolution > 0 &&
		l.Resolution <= time.Duration(math.MaxInt64>>l.Levels)
}

// MaxDelay is the longest delay the ladder can give: (2^N - 1) × resolution.
func (l Ladder) MaxDelay() time.Duration {
	return time.Duration(uint64(1)<<l.Levels-1) * l.Resolution
}

// TTL is the fixed x-message-ttl of level k: resolution × 2^k.
func (l Ladder) TTL(k int) time.Duration { return l.Resolution << k }

// Steps is delay d in resolution steps, rounded up so that a message never
// arrives early. ok is false for a negative delay or one beyond MaxDelay.
func (l Ladder) Steps(d time.Duration) (steps uint64, ok bool) {
	if d < 0 || d > l.MaxDelay() {
		return 0, false
	}
	return uint64((d + l.Resolution - 1) / l.Resolution), true
}

// id names the ladder inside object names: "{resolution}.{levels}".
func (l Ladder) id() string {
	return LevelsPrefix + FormatDelay(l.Resolution) + "." + strconv.Itoa(l.Levels)
}

// StageExchange names stage k (1 ≤ k ≤ N): the topic exchange that routes
// a message to the highest level below k whose bit is set.
func (l Ladder) StageExchange(k int) string { return l.id() + ".x" + strconv.Itoa(k) }

// EntryExchange is where a delayed message is published: stage N.
func (l Ladder) EntryExchange() string { return l.StageExchange(l.Levels) }

// LevelQueue names level k's queue; its TTL is part of the name because a
// queue's TTL is immutable.
func (l Ladder) LevelQueue(k int) string {
	return l.id() + ".q" + strconv.Itoa(k) + "." + FormatDelay(l.TTL(k))
}

// DeliveryExchange names the topic exchange that routes a message whose
// remaining bits are all 0 to its destination queue.
func (l Ladder) DeliveryExchange() string { return l.id() + ".deliver" }

// DeadLetterExchange and DeadLetterQueue name the ladder's dead end, for
// messages whose destination the delivery exchange does not know.
func (l Ladder) DeadLetterExchange() string { return l.id() + ".dlx" }

// DeadLetterQueue names the ladder's DLQ; see DeadLetterExchange.
func (l Ladder) DeadLetterQueue() string { return l.id() + ".dlq" }

// Next is where level k's queue dead-letters: stage k, which sees only
// the bits below k; level 0 dead-letters straight into the delivery
// exchange.
func (l Ladder) Next(k int) string {
	if k == 0 {
		return l.DeliveryExchange()
	}
	return l.StageExchange(k)
}

// StageBinding is one binding of a stage exchange: messages matching
// Pattern go to level Level's queue, or, with Level -1, to the delivery
// exchange.
type StageBinding struct {
	Pattern string
	Level   int
}

// StageBindings are stage k's bindings: one per level j below k (bits
// k-1..j+1 are 0, bit j is 1), and one to the delivery exchange (bits
// k-1..0 are 0). Exactly one matches any routing key RoutingKey writes.
func (l Ladder) StageBindings(k int) []StageBinding {
	out := make([]StageBinding, 0, k+1)
	for j := k - 1; j >= -1; j-- {
		var b strings.Builder
		b.WriteString(strings.Repeat("*.", l.Levels-k))
		b.WriteString(strings.Repeat("0.", k-1-j))
		if j >= 0 {
			b.WriteString("1.")
			b.WriteString(strings.Repeat("*.", j))
		}
		b.WriteString("#")
		out = append(out, StageBinding{Pattern: b.String(), Level: j})
	}
	return out
}

// DeliveryPattern is the delivery exchange's binding key for destination
// queue dest: N words of bits, then dest's own words.
func (l Ladder) DeliveryPattern(dest string) string {
	return strings.Repeat("*.", l.Levels) + dest
}

// RoutingKey is the routing key that delays a message by d and then
// delivers it to the queue dest.
func (l Ladder) RoutingKey(d time.Duration, dest string) (string, error) {
	s, ok := l.Steps(d)
	if !ok {
		return "", fmt.Errorf("delay %s is outside 0..%s, the range of ladder %s", d, l.MaxDelay(), l)
	}
	var b strings.Builder
	b.Grow(2*l.Levels + len(dest))
	for k := l.Levels - 1; k >= 0; k-- {
		b.WriteByte('0' + byte(s>>k&1))
		b.WriteByte('.')
	}
	b.WriteString(dest)
	return b.String(), nil
}

// String describes the ladder: "8 levels of 100ms (max 25.5s)".
func (l Ladder) String() string {
	return fmt.Sprintf("%s of %s (max %s)", count(l.Levels, "level", "levels"), FormatDelay(l.Resolution), l.MaxDelay())
}

// count is n and its noun in number, as internal/english.Count words it:
// contract brings retry nothing of rmqtopo's beyond itself, so it cannot
// import that package.
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// ErrNotLevel says a name is no level queue of any ladder.
var ErrNotLevel = errors.New("not a level queue")

var levelQueue = regexp.MustCompile(`^` + regexp.QuoteMeta(LevelsPrefix) +
	`(\d+(?:ms|s|m|h))\.(\d+)\.q(\d+)\.(\d+(?:ms|s|m|h))$`)

// ParseLevelQueue recognises a name LevelQueue gives: its ladder and level.
func ParseLevelQueue(name string) (l Ladder, level int, err error) {
	m := levelQueue.FindStringSubmatch(name)
	if m == nil {
		return Ladder{}, 0, ErrNotLevel
	}
	res, ok := ParseDelay(m[1])
	n, err1 := strconv.Atoi(m[2])
	k, err2 := strconv.Atoi(m[3])
	l = Ladder{Resolution: res, Levels: n}
	if !ok || err1 != nil || err2 != nil || !l.fits() || k >= n {
		return Ladder{}, 0, ErrNotLevel
	}
	if l.LevelQueue(k) != name {
		return Ladder{}, 0, ErrNotLevel
	}
	return l, k, nil
}

var ladderObject = regexp.MustCompile(`^` + regexp.QuoteMeta(LevelsPrefix) + `(\d+(?:ms|s|m|h))\.(\d+)\.`)

// ParseLadderObject recognises the name of any object of a ladder (level
// queue, stage, delivery exchange, dead end) and returns its ladder.
func ParseLadderObject(name string) (Ladder, bool) {
	m := ladderObject.FindStringSubmatch(name)
	if m == nil {
		return Ladder{}, false
	}
	res, ok := ParseDelay(m[1])
	n, err := strconv.Atoi(m[2])
	l := Ladder{Resolution: res, Levels: n}
	if !ok || err != nil || !l.fits() {
		return Ladder{}, false
	}
	switch name {
	case l.DeliveryExchange(), l.DeadLetterExchange(), l.DeadLetterQueue():
		return l, true
	}
	for k := range l.Levels {
		if name == l.LevelQueue(k) || name == l.StageExchange(k+1) {
			return l, true
		}
	}
	return Ladder{}, false
}

// LevelsMarker names the marker of a work queue whose delayed retries go
// through the vhost's delay ladder ("Q.retry.levels"): a fanout exchange
// with no bindings, there only to be found (not internal: the Kubernetes
// operator and Terraform cannot declare an internal exchange; a message
// published to it reaches no queue). The broker tells an
// AMQP client whether an exchange exists, but not where a binding leads,
// so a service cannot see that Q.retry sends its delayed attempts into a
// ladder; the marker says so. A helper without the ladder (and the delays
// it picks) must refuse such a queue: its retry copies, published with Q
// as routing key, match no stage of the ladder, and would be returned
// and taken for an exhausted schedule. A helper with a ladder must refuse
// a queue without the marker: a wait queue would dead-letter its copies,
// routed by the ladder's key, to no queue.
func LevelsMarker(queue string) string { return queue + levelsMarkerSuffix }

const levelsMarkerSuffix = ".retry.levels"

// IsLevelsMarker reports whether name is a LevelsMarker.
func IsLevelsMarker(name string) bool {
	return len(name) > len(levelsMarkerSuffix) && strings.HasSuffix(name, levelsMarkerSuffix)
}

// Name is the ladder's common name prefix, "rmqtopo.levels.100ms.23", for
// showing the ladder as one thing.
func (l Ladder) Name() string { return l.id() }
