package broker

import (
	"strings"
	"testing"
)

// MigrationLog says every step, and the moves at most once a second.
func TestMigrationLog(t *testing.T) {
	var out strings.Builder
	log := MigrationLog(&out)
	log("q", StepMoveOut, 10)
	log("q", StepMoveOut, 20) // within the second: not shown
	log("q", StepDelete, 20)
	log("q", StepDeclare, 0)
	log("q", StepDone, 20)
	want := `migrate queue "q": move-out: 10 messages moved
migrate queue "q": delete, after moving 20 messages out
migrate queue "q": declare
migrate queue "q": done, 20 messages moved back
`
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
}
