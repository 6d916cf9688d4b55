// Package waitguard sizes the wall-clock guards that tests put around a
// wait: for the broker to dead-letter, for a process to print, for a node
// to come back.
//
// A guard is never a timing goal (those are benchmarks in `make bench`, see
// docs/benchmarks.md): it only turns a hang into a failure, so a busy
// machine must make a test slower, never red. Each guard is written as what
// the wait needs on a quiet machine; For makes it Factor times that, and
// never less than Floor, because a broker on a loaded 2-CPU machine pauses
// for a second or more at a time whatever the wait (seen in the lateness
// benchmarks). RMQTOPO_TEST_GUARD_SCALE multiplies every guard for a
// machine slower still.
package waitguard

import (
	"os"
	"strconv"
	"time"
)

// Factor is how many times its quiet-machine need a guard allows.
const Factor = 10

// Floor is the least guard: a wait of milliseconds still survives a few
// broker pauses and a scheduler that runs the test last.
const Floor = 30 * time.Second

// ScaleEnv names the variable that multiplies every guard (a number such
// as 3 or 0.5; unset, empty or invalid means 1).
const ScaleEnv = "RMQTOPO_TEST_GUARD_SCALE"

// For returns the guard for a wait that needs quiet on a quiet machine:
// Factor times quiet, at least Floor, times the scale.
func For(quiet time.Duration) time.Duration {
	return time.Duration(float64(max(Factor*quiet, Floor)) * scale())
}

// Deadline is time.Now plus For(quiet).
func Deadline(quiet time.Duration) time.Time {
	return time.Now().Add(For(quiet))
}

// scale reads ScaleEnv; tests may run For many times, and the read is
// cheap enough not to cache (and so a test can set it with t.Setenv).
func scale() float64 {
	f, err := strconv.ParseFloat(os.Getenv(ScaleEnv), 64)
	if err != nil || f <= 0 {
		return 1
	}
	return f
}

// AtLeast is For(quiet), but never under least (scaled like every guard):
// for a guard that once ran out on a loaded machine and was raised above
// ten times its need, since a guard may grow, never shrink.
func AtLeast(quiet, least time.Duration) time.Duration {
	return For(max(quiet, least/Factor))
}
