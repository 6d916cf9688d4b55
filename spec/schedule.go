package spec

import (
	"math"
	"time"

	"github.com/rmqtopo/rmqtopo/contract"
)

// Delays returns the delay before each delayed retry, in order.
func (p RetryPolicy) Delays() []time.Duration {
	switch p.Kind {
	case "delays":
		return append([]time.Duration(nil), p.Explicit...)
	case "fixed":
		return repeat(p.Attempts, func(int) time.Duration { return p.Delay })
	case "linear":
		return repeat(p.Attempts, func(i int) time.Duration { return p.Step * time.Duration(i+1) })
	case "exponential":
		return repeat(p.Attempts, func(i int) time.Duration {
			ms := float64(p.Initial.Milliseconds()) * math.Pow(p.Factor, float64(i))
			limit := float64(MaxTTL.Milliseconds())
			if p.Max > 0 {
				limit = float64(p.Max.Milliseconds())
			}
			if ms > limit || math.IsInf(ms, 0) || math.IsNaN(ms) {
				ms = limit
			}
			return time.Duration(math.Round(ms)) * time.Millisecond
		})
	}
	return nil
}

// count is len(p.Delays()), without making them.
func (p RetryPolicy) count() int {
	switch p.Kind {
	case "delays":
		return len(p.Explicit)
	case "fixed", "linear", "exponential":
		return p.Attempts
	}
	return 0
}

func repeat(n int, f func(int) time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

// Step is one row of a queue's retry schedule.
type Step struct {
	// Attempt is the delivery number: 1 is the first delivery, 2 the first
	// retry; the contract's HeaderAttempt on that delivery says the same.
	Attempt int `json:"attempt"`
	// Delay is the wait before this delivery; Elapsed is the total wait
	// since the first delivery (ignoring processing time).
	Delay   time.Duration `json:"delay_ms"`
	Elapsed time.Duration `json:"elapsed_ms"`
	// Via is where the message waits before this delivery ("" for the first
	// delivery, the work queue itself for an immediate retry).
	Via string `json:"via"`
	// OnFailure is where the message goes if this delivery fails.
	OnFailure string `json:"on_failure"`
	// Jitter: the delay is drawn uniformly between 0 and Delay, and Elapsed
	// is the longest total wait.
	Jitter bool `json:"jitter,omitempty"`
}

// Schedule returns the queue's delivery timeline for the given vhost
// defaults; the last step's OnFailure is the DLQ (or "discarded").
func (s *Spec) Schedule(q Queue) []Step {
	delays := q.Retry.Delays()
	total := q.ImmediateRetries + len(delays)
	steps := make([]Step, 0, total+1)
	var elapsed time.Duration
	via := make([]string, total+1)
	for k := 1; k <= total; k++ {
		via[k] = s.retryDestination(q, k)
	}
	for k := 0; k <= total; k++ {
		var d time.Duration
		if k > q.ImmediateRetries {
			d = delays[k-q.ImmediateRetries-1]
		}
		elapsed += d
		next := s.deadEnd(q)
		if k < total {
			next = via[k+1]
		}
		jitter := d > 0 && q.Retry.Jitter == JitterFull
		steps = append(steps, Step{Attempt: k + 1, Delay: d, Elapsed: elapsed, Via: via[k], OnFailure: next, Jitter: jitter})
	}
	return steps
}

// retryDestination is where retry number k (1-based) of q waits.
func (s *Spec) retryDestination(q Queue, k int) string {
	if k <= q.ImmediateRetries {
		return q.Name
	}
	d := q.Retry.Delays()[k-q.ImmediateRetries-1]
	switch q.Preset {
	case PresetGoQueue:
		return goqueueRetryQueue(q.Name, k)
	case PresetOutbox:
		return outboxDelayQueue(q.Name, d)
	case PresetSpring:
		return springWaitQueue(q, d)
	}
	switch s.layoutOf(q) {
	case LayoutNative:
		return q.Name
	case LayoutLevels:
		l, _ := s.Ladder()
		return l.EntryExchange()
	case LayoutPerAttempt:
		return contract.PerAttemptWaitQueue(ReturnTo(q), k, d)
	}
	return contract.SharedWaitQueue(d)
}

func (s *Spec) deadEnd(q Queue) string {
	if !q.DLQ {
		return "discarded"
	}
	return DLQOf(q)
}

// LayoutOf is the layout q's retries take (never auto): what Resolve
// chose for the broker, else the one the spec writes, with auto shared.
func (s *Spec) LayoutOf(q Queue) Layout { return s.layoutOf(q) }

// layoutOf is the layout q's retries take: what Resolve chose, else the
// one the spec writes, where auto (written or not) is shared.
func (s *Spec) layoutOf(q Queue) Layout {
	if q.res.set {
		return q.res.layout
	}
	if l := s.writtenLayout(q); l != LayoutAuto {
		return l
	}
	return LayoutShared
}

// writtenLayout is the layout the spec gives q, auto when neither q nor
// the spec names one.
func (s *Spec) writtenLayout(q Queue) Layout {
	switch {
	case q.Layout != "":
		return q.Layout
	case s.Layout != "":
		return s.Layout
	}
	return LayoutAuto
}
