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
// A Ladder of N levels with resolution r has one quorum queue per level k
// (0 ≤ k < N) with the fixed TTL r×2^k, and one topic exchange per level,
// the level's stage. A delay d is rounded up to s = ⌈d/r⌉ steps, and the
// bits of s are written into the routing key, most significant first, one
// word "0" or "1" per level, before the destination queue's name:
//
//	b(N-1) . … . b1 . b0 . destination
//
// Stage k looks at word N-1-k: with a 1 it routes the message to level k's
// queue, with a 0 straight on to stage k-1 (an exchange-to-exchange
// binding). Level k's queue dead-letters into stage k-1 when its TTL
// expires, keeping the routing key. Below stage 0 is the delivery exchange,
// which routes on the destination words, skipping the N bit words, to the
// destination queue. The entry is stage N-1.
//
// So a message waits in each level whose bit is 1, once, for exactly the
// sum s×r, and only ever moves to lower levels: its x-death can never name
// the queue it is dead-lettered into, and RabbitMQ's dead-letter cycle rule
// never fires. Each level has a single TTL, so its FIFO order is expiry
// order: no message waits behind a longer one (no head-of-line blocking).
// A delay is never shortened: lateness is below r plus the broker's latency
// per level passed.
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

// StageExchange names the topic exchange that routes on level k's bit.
func (l Ladder) StageExchange(k int) string { return l.id() + ".x" + strconv.Itoa(k) }

// EntryExchange is where a delayed message is published: the top stage.
func (l Ladder) EntryExchange() string { return l.StageExchange(l.Levels - 1) }

// LevelQueue names level k's queue; its TTL is part of the name because a
// queue's TTL is immutable.
func (l Ladder) LevelQueue(k int) string {
	return l.id() + ".q" + strconv.Itoa(k) + "." + FormatDelay(l.TTL(k))
}

// DeliveryExchange names the topic exchange below stage 0 that routes a
// message to its destination queue.
func (l Ladder) DeliveryExchange() string { return l.id() + ".deliver" }

// DeadLetterExchange and DeadLetterQueue name the ladder's dead end, for
// messages whose destination the delivery exchange does not know.
func (l Ladder) DeadLetterExchange() string { return l.id() + ".dlx" }

// DeadLetterQueue names the ladder's DLQ; see DeadLetterExchange.
func (l Ladder) DeadLetterQueue() string { return l.id() + ".dlq" }

// Next is where level k's queue dead-letters, and where stage k sends a
// message whose bit k is 0: stage k-1, or the delivery exchange below
// stage 0.
func (l Ladder) Next(k int) string {
	if k == 0 {
		return l.DeliveryExchange()
	}
	return l.StageExchange(k - 1)
}

// StagePattern is the binding key on stage k matching bit k = bit (0 or 1).
func (l Ladder) StagePattern(k, bit int) string {
	return strings.Repeat("*.", l.Levels-1-k) + strconv.Itoa(bit) + ".#"
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
	return fmt.Sprintf("%d levels of %s (max %s)", l.Levels, FormatDelay(l.Resolution), l.MaxDelay())
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
