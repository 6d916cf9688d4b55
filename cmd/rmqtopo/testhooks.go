//go:build rmqtopo_testhooks

package main

import (
	"os"
	"strconv"
	"strings"
)

// killAt returns the failpoint of RMQTOPO_TEST_MIGRATE_KILL_AT, built only
// with -tags rmqtopo_testhooks: apply kills itself (SIGKILL on unix,
// TerminateProcess on windows) at a step of a migration, "STEP" or
// "STEP:N" (a move step once N messages moved), or "changes:N" (once N
// changes are made). The tests use it to check that a migration or an
// apply interrupted anywhere is finished by the next apply.
func killAt() func(step string, moved int) {
	v := os.Getenv(failpointEnv)
	if v == "" {
		return func(string, int) {}
	}
	step, n, _ := strings.Cut(v, ":")
	at, _ := strconv.Atoi(n)
	return func(s string, moved int) {
		if s == step && moved >= at {
			if p, err := os.FindProcess(os.Getpid()); err == nil {
				_ = p.Kill()
			}
		}
	}
}
