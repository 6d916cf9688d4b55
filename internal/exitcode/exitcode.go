// Package exitcode is the one table of rmqtopo's exit codes, a contract
// with the scripts and pipelines that run it; docs/exit-codes.md is its
// words. Each code is distinct across the whole CLI, so a wrapper that
// runs several commands can still tell what a code means. cmd/rmqtopo
// exits with them, and status ranks the four of `status
// --exit-code` (Report.ExitCode). It imports nothing, so that any layer
// that decides a code may name it.
package exitcode

const (
	// Failure is any error: bad input, an unreachable broker, a refused
	// write, an interrupt; usage errors too.
	Failure = 1
	// Changes: plan --detailed-exitcode found changes apply would make.
	Changes = 2
	// DLQNotEmpty: status --exit-code found messages in a DLQ.
	DLQNotEmpty = 3
	// Refused: plan --detailed-exitcode found changes that apply would
	// refuse, or apply refused them (blocking diagnostics, such as a
	// replace that puts messages at risk without --allow-destroy).
	Refused = 4
	// Missing: status --exit-code found objects of the specs missing from
	// the broker (queues, or anything plan would create).
	Missing = 5
	// Drift: status --exit-code found objects that differ from the specs.
	Drift = 6
	// DeadLettersStuck: status --exit-code found a wait queue that held
	// dead-letters and forwarded none of them within --held-margin. It
	// ranks after 5 and before 6 (docs/exit-codes.md says why).
	DeadLettersStuck = 7
	// UpgradeRefused: upgrade preview found what the target release
	// refuses (verdicts of severity error).
	UpgradeRefused = 8
	// UpgradeWarnings: upgrade preview --detailed-exitcode found only what
	// the target ignores or does differently.
	UpgradeWarnings = 9
)
