package broker

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// MigrationLog returns a Session.MigrateHook that reports each step of a
// migration on w, the moves about once a second: a migration of a large
// queue shows it is alive without a line per batch.
func MigrationLog(w io.Writer) func(queue, step string, moved int) {
	var (
		mu   sync.Mutex
		last time.Time
	)
	return func(queue, step string, moved int) {
		mu.Lock()
		defer mu.Unlock()
		switch step {
		case StepMoveOut, StepMoveBack:
			if time.Since(last) >= time.Second {
				last = time.Now()
				fmt.Fprintf(w, "migrate queue %q: %s: %d messages moved\n", queue, step, moved)
			}
		case StepDelete:
			fmt.Fprintf(w, "migrate queue %q: %s, after moving %d messages out\n", queue, step, moved)
		case StepDone:
			fmt.Fprintf(w, "migrate queue %q: %s, %d messages moved back\n", queue, step, moved)
		default:
			fmt.Fprintf(w, "migrate queue %q: %s\n", queue, step)
		}
	}
}
