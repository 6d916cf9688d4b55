package status

import (
	"github.com/rmqtopo/rmqtopo/internal/exitcode"
	"github.com/rmqtopo/rmqtopo/plan"
)

// ExitCode picks the code (internal/exitcode's table) of the most urgent
// finding: messages waiting in a DLQ (someone must look at them), then
// missing objects (the topology is not there: messages may be unroutable,
// and a missing work queue is itself a reason dead-letters cannot be
// forwarded), then stuck dead-letters (retries not happening now), then
// drift; 0 for none.
func (s Report) ExitCode() int {
	missing := s.Summary.MissingQueues > 0
	for _, d := range s.Drift {
		missing = missing || d.Action == plan.Create
	}
	switch {
	case s.DLQHasMessages():
		return exitcode.DLQNotEmpty
	case missing:
		return exitcode.Missing
	case s.Summary.WaitQueuesStuck > 0:
		return exitcode.DeadLettersStuck
	case s.Summary.DriftedObjects > 0:
		return exitcode.Drift
	}
	return 0
}

// HeldWaitMatters reports whether re-reading the held wait queues can
// change the exit code, and the code as it stands. It asks ExitCode with
// none of them stuck and with all of them stuck, so the ranking stays in
// one place: the two agree when a finding that outranks stuck
// dead-letters (a DLQ holding messages, missing objects) decides the code.
func (s Report) HeldWaitMatters(held int) (code int, matters bool) {
	allStuck := s
	allStuck.Summary.WaitQueuesStuck = held
	code = s.ExitCode()
	return code, allStuck.ExitCode() != code
}
