package importer

import (
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/rmqtopo/rmqtopo/spec"
)

func itoa(n int) string { return strconv.Itoa(n) }

// policyFor writes a list of delays the way a person would: fixed when
// they are all equal, linear when each is n × the first, exponential when
// a whole factor gives them (capped by a max when the tail is flat), and
// an explicit list otherwise. Every form is checked to give back exactly
// these delays.
func policyFor(delays []time.Duration) spec.RetryPolicy {
	n := len(delays)
	if n == 0 {
		return spec.RetryPolicy{}
	}
	list := spec.RetryPolicy{Kind: "delays", Explicit: delays}
	if n < 2 {
		return list
	}
	first := delays[0]
	candidates := []spec.RetryPolicy{
		{Kind: "fixed", Delay: first, Attempts: n},
		{Kind: "linear", Step: first, Attempts: n},
	}
	if first > 0 && delays[1] > first {
		factor := float64(delays[1]) / float64(first)
		if factor == math.Trunc(factor) {
			candidates = append(candidates, spec.RetryPolicy{Kind: "exponential", Initial: first, Factor: factor, Attempts: n})
			// A max reads naturally only where it flattens the tail.
			if delays[n-1] == delays[n-2] {
				candidates = append(candidates, spec.RetryPolicy{Kind: "exponential", Initial: first, Factor: factor, Max: delays[n-1], Attempts: n})
			}
		}
	}
	for _, c := range candidates {
		if c.Kind == "exponential" && n < 3 {
			continue
		}
		if slices.Equal(c.Delays(), delays) {
			return c
		}
	}
	return list
}
