package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/spec"
)

// choices are the plan choices of the flags and the spec: --prune,
// --migrate for every queue, migrate: true per queue.
func choices(files []*spec.File, prune, migrateAll bool) plan.Choices {
	return plan.Choices{Specs: spec.Names(files), Prune: prune, Migrate: plan.Migration{All: migrateAll, Queues: spec.Migrations(files...)}}
}

// failpointEnv names the environment variable of the migration
// failpoint; only binaries built with -tags rmqtopo_testhooks honour it
// (testhooks.go).
const failpointEnv = "RMQTOPO_TEST_MIGRATE_KILL_AT"

// migrateHook reports each step of a migration on stderr (moves about
// once a second) and honours the failpoint.
func migrateHook(e *env) func(queue, step string, moved int) {
	kill := killAt()
	var (
		mu   sync.Mutex
		last time.Time
	)
	return func(queue, step string, moved int) {
		kill(step, moved)
		mu.Lock()
		defer mu.Unlock()
		switch step {
		case broker.StepMoveOut, broker.StepMoveBack:
			if time.Since(last) >= time.Second {
				last = time.Now()
				fmt.Fprintf(e.stderr, "migrate queue %q: %s: %d messages moved\n", queue, step, moved)
			}
		case broker.StepDelete:
			fmt.Fprintf(e.stderr, "migrate queue %q: %s, after moving %d messages out\n", queue, step, moved)
		case broker.StepDone:
			fmt.Fprintf(e.stderr, "migrate queue %q: %s, %d messages moved back\n", queue, step, moved)
		default:
			fmt.Fprintf(e.stderr, "migrate queue %q: %s\n", queue, step)
		}
	}
}
