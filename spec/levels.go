package spec

import (
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Levels configures a vhost's ladder of delay levels (layout levels).
type Levels struct {
	// Resolution is the shortest level's TTL; delays are rounded up to it.
	Resolution time.Duration
	// Max is the longest delay the ladder must give.
	Max time.Duration
}

// Defaults of the top-level levels key: 100 ms steps up to 7 days, 23
// levels. 100 ms is below what a retry or a "retry after" needs and above
// the broker's own dead-lettering latency; 7 days covers a week-long
// schedule.
const (
	DefaultLevelsResolution = 100 * time.Millisecond
	DefaultLevelsMax        = 7 * 24 * time.Hour
)

// Ladder returns the vhost's delay ladder: present when the spec has a
// levels key or a queue uses the levels layout. Call it on a spec that
// validated; an invalid levels key gives the default ladder.
func (s *Spec) Ladder() (contract.Ladder, bool) {
	if s.Levels == nil && !s.usesLevels() {
		return contract.Ladder{}, false
	}
	res, max := DefaultLevelsResolution, DefaultLevelsMax
	if s.Levels != nil {
		res, max = s.Levels.Resolution, s.Levels.Max
	}
	l, err := contract.NewLadder(res, max)
	if err != nil {
		l, _ = contract.NewLadder(DefaultLevelsResolution, DefaultLevelsMax)
	}
	return l, true
}

func (s *Spec) usesLevels() bool {
	for _, q := range s.Queues {
		if q.Preset == PresetNone && s.layoutOf(q) == LayoutLevels {
			return true
		}
	}
	return false
}

// levels decodes the top-level levels key.
func (d *decoder) levels(n *yaml.Node, path string) *Levels {
	l := &Levels{Resolution: DefaultLevelsResolution, Max: DefaultLevelsMax}
	if !levelsObject.decode(d, n, path, l, nil) {
		return nil
	}
	if _, err := contract.NewLadder(l.Resolution, l.Max); err != nil {
		d.add(at(n, path), "%v", err)
	}
	return l
}

func (d *decoder) jitter(n *yaml.Node, path string) string {
	var v string
	d.str(n, path, &v)
	switch v {
	case JitterNone, JitterFull:
		return v
	}
	if n.Kind == yaml.ScalarNode {
		d.add(at(n, path), "unknown jitter %q (expected none or full)", v)
	}
	return ""
}

// ladder generates the vhost's delay ladder, if it has one, and binds every
// declared queue to its delivery exchange, so that any queue of the spec
// can be the destination of a delayed publish.
func (b *builder) ladder() {
	l, ok := b.s.Ladder()
	if !ok {
		return
	}
	o := origin{at: b.s.at, what: "delay " + l.String(), shared: true}
	typ := b.waitQueueType(Queue{}, LayoutShared)
	for k := range l.Levels {
		args := b.typeArgs(typ)
		args["x-message-ttl"] = l.TTL(k).Milliseconds()
		deadLetterTo(args, l.Next(k), nil)
		b.addQueue(topology.Queue{Name: l.LevelQueue(k), Arguments: args}, o)
	}
	for k := 1; k <= l.Levels; k++ {
		b.addExchange(topology.Exchange{Name: l.StageExchange(k), Type: "topic", Durable: true}, o)
		for _, sb := range l.StageBindings(k) {
			if sb.Level < 0 {
				b.bind(l.StageExchange(k), topology.DestExchange, l.DeliveryExchange(), sb.Pattern, nil)
			} else {
				b.bind(l.StageExchange(k), topology.DestQueue, l.LevelQueue(sb.Level), sb.Pattern, nil)
			}
		}
	}
	b.addExchange(topology.Exchange{Name: l.DeliveryExchange(), Type: "topic", Durable: true,
		Arguments: map[string]any{"alternate-exchange": l.DeadLetterExchange()}}, o)
	b.addExchange(topology.Exchange{Name: l.DeadLetterExchange(), Type: "fanout", Durable: true}, o)
	b.addQueue(topology.Queue{Name: l.DeadLetterQueue(), Arguments: deadEndArgs(typ)}, o)
	b.bind(l.DeadLetterExchange(), topology.DestQueue, l.DeadLetterQueue(), "", nil)
	for _, q := range b.s.Queues {
		if _, declared := b.queueAt[q.Name]; declared && q.Name != "" {
			b.checkDestination(l, q)
			b.bind(l.DeliveryExchange(), topology.DestQueue, ReturnTo(q), l.DeliveryPattern(q.Name), nil)
		}
	}
}

// checkDestination reports a queue the delivery exchange cannot route to
// by its name: a routing key holds 255 bytes, and topic patterns treat the
// words "*" and "#" as wildcards.
func (b *builder) checkDestination(l contract.Ladder, q Queue) {
	if n := len(l.DeliveryPattern(q.Name)); n > 255 {
		b.errorf(q.nameAt, "queue %q is too long for the delay ladder: its routing key (%d bit words and the name) is %d bytes; RabbitMQ allows 255",
			abbreviate(q.Name), l.Levels, n)
	}
	if slices.ContainsFunc(strings.Split(q.Name, "."), func(w string) bool { return w == "*" || w == "#" }) {
		b.errorf(q.nameAt, "queue %q has a word \"*\" or \"#\", which the delay ladder's topic exchanges read as wildcards", q.Name)
	}
}

// levelsRetries routes q's delayed retries into the ladder: the service
// picks each delay (with jitter, or a "retry after") and writes it into the
// routing key, and the retry exchange still decides which retries exist.
func (b *builder) levelsRetries(q Queue) {
	l, _ := b.s.Ladder()
	retry := contract.RetryExchange(q.Name)
	if len(q.Retry.Delays()) > 0 {
		b.addExchange(topology.Exchange{Name: contract.LevelsMarker(q.Name), Type: "fanout", Durable: true},
			b.generated(q, "levels marker"))
	}
	for i, d := range q.Retry.Delays() {
		k := q.ImmediateRetries + i + 1
		if d > l.MaxDelay() {
			b.errorf(q.retryAt, "delay %d (%s) is beyond the delay ladder's maximum %s; raise levels.max", i+1, d, l.MaxDelay())
		}
		b.bindCanonical(retry, topology.DestExchange, l.EntryExchange(), "", b.attemptArgs(k+1)) // retry k is attempt k+1
	}
}

// checkJitter reports jitter on a queue whose wait queues have fixed TTLs.
func (b *builder) checkJitter(q Queue) {
	// Unresolved, auto may yet be native or levels (Resolve).
	auto := !q.res.set && b.s.writtenLayout(q) == LayoutAuto
	if l := b.s.layoutOf(q); q.Retry.Jitter == JitterFull && !auto && (q.Preset != PresetNone || l != LayoutLevels && l != LayoutNative) {
		b.errorf(q.retryAt, "jitter needs layout levels or native: queue %q's wait queues have fixed TTLs", q.Name)
	}
}

// WaitQueueCounts is how many wait queues the spec's native delayed
// retries need in each layout, for comparison: as if every queue with
// delayed retries used that layout. A policy with jitter needs, in the
// shared and per-attempt layouts, one wait queue per resolution step up to
// each delay, the only way fixed TTLs can spread delays.
func (s *Spec) WaitQueueCounts() map[Layout]int {
	l, ok := s.Ladder()
	if !ok {
		l, _ = contract.NewLadder(DefaultLevelsResolution, DefaultLevelsMax)
	}
	shared := map[time.Duration]bool{}
	perAttempt := 0
	for _, q := range s.Queues {
		if q.Preset != PresetNone {
			continue
		}
		for _, d := range q.Retry.Delays() {
			if q.Retry.Jitter != JitterFull {
				shared[d] = true
				perAttempt++
				continue
			}
			steps, _ := l.Steps(min(d, l.MaxDelay()))
			for i := uint64(1); i <= steps; i++ {
				shared[time.Duration(i)*l.Resolution] = true
			}
			perAttempt += int(steps)
		}
	}
	return map[Layout]int{LayoutShared: len(shared), LayoutPerAttempt: perAttempt, LayoutLevels: l.Levels}
}
