package broker

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/rmqtopo/rmqtopo/internal/english"
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
				fmt.Fprintf(w, "migrate queue %q: %s: %s moved\n", queue, step, english.Count(moved, "message", "messages"))
			}
		case StepDelete:
			fmt.Fprintf(w, "migrate queue %q: %s, after moving %s out\n", queue, step, english.Count(moved, "message", "messages"))
		case StepDone:
			fmt.Fprintf(w, "migrate queue %q: %s, %s moved back\n", queue, step, english.Count(moved, "message", "messages"))
		default:
			fmt.Fprintf(w, "migrate queue %q: %s\n", queue, step)
		}
	}
}
