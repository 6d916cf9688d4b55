//go:build rmqtopo_testhooks

package failpoint

import (
	"os"
	"strconv"
	"strings"
)

// KillAt returns the failpoint set in Env: a func that kills the process
// (SIGKILL on unix, TerminateProcess on windows) when called with its step
// and a count at or past its N.
func KillAt() func(step string, n int) {
	v := os.Getenv(Env)
	if v == "" {
		return func(string, int) {}
	}
	step, n, _ := strings.Cut(v, ":")
	at, _ := strconv.Atoi(n)
	return func(s string, done int) {
		if s == step && done >= at {
			if p, err := os.FindProcess(os.Getpid()); err == nil {
				_ = p.Kill()
			}
		}
	}
}
