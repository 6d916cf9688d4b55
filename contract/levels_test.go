package contract

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestNewLadder(t *testing.T) {
	cases := []struct {
		res, max time.Duration
		levels   int
		maxDelay time.Duration
	}{
		{100 * time.Millisecond, 100 * time.Millisecond, 1, 100 * time.Millisecond},
		{100 * time.Millisecond, 700 * time.Millisecond, 3, 700 * time.Millisecond},
		{100 * time.Millisecond, 701 * time.Millisecond, 4, 1500 * time.Millisecond},
		{100 * time.Millisecond, 800 * time.Millisecond, 4, 1500 * time.Millisecond},
		{100 * time.Millisecond, 7 * 24 * time.Hour, 23, 8388607 * 100 * time.Millisecond},
		{time.Second, 24 * time.Hour, 17, 131071 * time.Second},
	}
	for _, c := range cases {
		l, err := NewLadder(c.res, c.max)
		if err != nil || l.Levels != c.levels || l.MaxDelay() != c.maxDelay {
			t.Errorf("NewLadder(%s, %s) = %v (max %s), %v; want %d levels, max %s", c.res, c.max, l.Levels, l.MaxDelay(), err, c.levels, c.maxDelay)
		}
	}
	for _, bad := range [][2]time.Duration{{0, time.Second}, {1500 * time.Microsecond, time.Second}, {time.Second, time.Millisecond}, {time.Millisecond, 1 << 62}} {
		if _, err := NewLadder(bad[0], bad[1]); err == nil {
			t.Errorf("NewLadder(%s, %s) accepted", bad[0], bad[1])
		}
	}
}

// topicMatch is AMQP topic matching: "*" one word, "#" zero or more.
func topicMatch(pattern, key string) bool {
	var match func(p, k []string) bool
	match = func(p, k []string) bool {
		switch {
		case len(p) == 0:
			return len(k) == 0
		case p[0] == "#":
			for i := 0; i <= len(k); i++ {
				if match(p[1:], k[i:]) {
					return true
				}
			}
			return false
		case len(k) == 0:
			return false
		case p[0] == "*" || p[0] == k[0]:
			return match(p[1:], k[1:])
		}
		return false
	}
	return match(strings.Split(pattern, "."), strings.Split(key, "."))
}

// walk follows a message through the ladder's bindings as the broker
// would, and returns the levels it waits in and the queue it ends in.
func walk(t *testing.T, l Ladder, key string, dests []string) (levels []int, end string) {
	t.Helper()
	for k := l.Levels; ; {
		next := -2
		for _, b := range l.StageBindings(k) {
			if topicMatch(b.Pattern, key) {
				if next != -2 {
					t.Fatalf("stage %d: key %q matches two bindings", k, key)
				}
				next = b.Level
			}
		}
		switch {
		case next == -2:
			t.Fatalf("stage %d: key %q matches no binding", k, key)
		case next >= k:
			t.Fatalf("stage %d routes key %q up to level %d", k, key, next)
		}
		if next == -1 {
			break
		}
		levels = append(levels, next)
		if next == 0 {
			break
		}
		k = next // level next dead-letters into stage next
	}
	for _, d := range dests {
		if topicMatch(l.DeliveryPattern(d), key) {
			if end != "" {
				t.Fatalf("key %q delivered to both %q and %q", key, end, d)
			}
			end = d
		}
	}
	if end == "" {
		end = l.DeadLetterQueue()
	}
	return levels, end
}

func TestLadderRoutesEveryDelay(t *testing.T) {
	l, err := NewLadder(100*time.Millisecond, 3100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	dests := []string{"orders", "orders.created", "x.orders"}
	for ms := 0; ms <= int(l.MaxDelay()/time.Millisecond); ms += 7 {
		d := time.Duration(ms) * time.Millisecond
		for _, dest := range dests {
			key, err := l.RoutingKey(d, dest)
			if err != nil {
				t.Fatal(err)
			}
			levels, end := walk(t, l, key, dests)
			var total time.Duration
			for i, k := range levels {
				total += l.TTL(k)
				if i > 0 && k >= levels[i-1] {
					t.Fatalf("delay %s: levels %v do not only go down (a dead-letter cycle)", d, levels)
				}
			}
			if end != dest || total < d || total-d >= l.Resolution {
				t.Fatalf("delay %s to %q: waits %s in levels %v and ends in %q", d, dest, total, levels, end)
			}
		}
	}
	if _, end := walk(t, l, "0.0.0.0.0.0.unknown", dests); end != l.DeadLetterQueue() {
		t.Errorf("an unknown destination ends in %q", end)
	}
	for _, d := range []time.Duration{-time.Millisecond, l.MaxDelay() + time.Millisecond} {
		if _, err := l.RoutingKey(d, "q"); err == nil {
			t.Errorf("RoutingKey(%s) accepted", d)
		}
	}
}

func TestLadderNames(t *testing.T) {
	l := Ladder{Resolution: 100 * time.Millisecond, Levels: 5}
	if got, want := l.LevelQueue(3), "rmqtopo.levels.100ms.5.q3.800ms"; got != want {
		t.Errorf("LevelQueue(3) = %q, want %q", got, want)
	}
	if got, want := l.EntryExchange(), "rmqtopo.levels.100ms.5.x5"; got != want {
		t.Errorf("EntryExchange = %q, want %q", got, want)
	}
	if got, want := l.Next(0), l.DeliveryExchange(); got != want {
		t.Errorf("Next(0) = %q, want %q", got, want)
	}
	want := []StageBinding{{"*.*.0.1.*.#", 1}, {"*.*.0.0.1.#", 0}, {"*.*.0.0.0.#", -1}}
	if got := l.StageBindings(3)[1:]; !slices.Equal(got, want) {
		t.Errorf("StageBindings(3)[1:] = %v, want %v", got, want)
	}
	for k := range l.Levels {
		got, level, err := ParseLevelQueue(l.LevelQueue(k))
		if err != nil || got != l || level != k {
			t.Errorf("ParseLevelQueue(%q) = %v, %d, %v", l.LevelQueue(k), got, level, err)
		}
		w, ok := ParseWaitQueue(l.LevelQueue(k))
		if !ok || w.Layout != WaitLevels || w.Delay != l.TTL(k) {
			t.Errorf("ParseWaitQueue(%q) = %+v, %v", l.LevelQueue(k), w, ok)
		}
	}
	for _, bad := range []string{"rmqtopo.levels.100ms.5.q5.3200ms", "rmqtopo.levels.100ms.5.q3.900ms",
		"rmqtopo.levels.100ms.5.dlq", "rmqtopo.levels.1h.40.q0.1h", "rmqtopo.levels.0ms.5.q0.0ms"} {
		if _, _, err := ParseLevelQueue(bad); err == nil {
			t.Errorf("ParseLevelQueue(%q) accepted", bad)
		}
	}
}

func TestParseLadderObject(t *testing.T) {
	l := Ladder{Resolution: time.Second, Levels: 3}
	names := []string{l.EntryExchange(), l.StageExchange(1), l.LevelQueue(2), l.DeliveryExchange(), l.DeadLetterExchange(), l.DeadLetterQueue()}
	for _, n := range names {
		if got, ok := ParseLadderObject(n); !ok || got != l {
			t.Errorf("ParseLadderObject(%q) = %v, %v", n, got, ok)
		}
	}
	for _, n := range []string{"rmqtopo.levels.1s.3.x4", "rmqtopo.levels.1s.3.q3.8s", "rmqtopo.levels.1s.3", "orders", "rmqtopo.levels.1s.3.x0"} {
		if _, ok := ParseLadderObject(n); ok {
			t.Errorf("ParseLadderObject(%q) accepted", n)
		}
	}
}
