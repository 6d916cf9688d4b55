package apply

import (
	"fmt"
	"time"
)

// Line says where an apply is, for a progress report: the step, changes
// done of the total, and the time since it began.
func (p Progress) Line(elapsed time.Duration) string {
	el := elapsed.Round(time.Second)
	switch {
	case p.Step == "" || p.Step == StepPlanning:
		return fmt.Sprintf("apply: %s (%s)", StepPlanning, el)
	case p.Step == StepRecords:
		return fmt.Sprintf("apply: %d/%d changes, %s (%s)", p.Done, p.Total, p.Step, el)
	}
	return fmt.Sprintf("apply: %d/%d changes, %s phase (%s)", p.Done, p.Total, p.Step, el)
}

// Newer reports whether p replaces last in a progress report: changes run
// concurrently, so a report may arrive after a later one; planning again
// (a vhost that appeared meanwhile) starts over.
func (p Progress) Newer(last Progress) bool {
	return p.Done >= last.Done || p.Step == StepPlanning
}
