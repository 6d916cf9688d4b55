package render

import (
	"fmt"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/plan"
)

// migrationMoves is the comment of a Migrate change: what it moves, and
// that it destroys nothing.
func migrationMoves(c plan.Change) string {
	n := "an unknown number of messages"
	switch {
	case c.Messages() == nil:
	case *c.Messages() == 1:
		n = "1 message"
	default:
		n = fmt.Sprintf("%d messages", *c.Messages())
	}
	return fmt.Sprintf("moves %s through %q and back; none destroyed", n, contract.MigrationQueue(c.Address.Name))
}

// migrateSummary completes the summary line of a plan with migrations;
// plans without any keep the line they always had.
func migrateSummary(s plan.ActionCounts) string {
	if s.Migrate == 0 {
		return ""
	}
	return fmt.Sprintf(", %d to migrate", s.Migrate)
}
