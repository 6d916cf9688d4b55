package main

import "github.com/rmqtopo/rmqtopo/internal/status"

// Exit codes are a contract with the scripts and pipelines that run
// rmqtopo; docs/exit-codes.md is their table. Each is distinct across the
// whole CLI, so a wrapper that runs several commands can still tell what a
// code means. Usage errors and every failure exit 1.
const (
	// ExitFailure is any error: bad input, an unreachable broker, a refused
	// write, an interrupt.
	ExitFailure = 1
	// ExitChanges: plan --detailed-exitcode found changes apply would make.
	ExitChanges = 2
	// ExitDLQNotEmpty: status --exit-code found messages in a DLQ.
	ExitDLQNotEmpty = status.ExitDLQNotEmpty
	// ExitRefused: plan --detailed-exitcode found changes that apply would
	// refuse, or apply refused them (blocking diagnostics, such as a
	// replace that puts messages at risk without --allow-destroy).
	ExitRefused = 4
	// ExitMissing: status --exit-code found objects of the specs missing
	// from the broker (queues, or anything plan would create).
	ExitMissing = status.ExitMissing
	// ExitDrift: status --exit-code found objects that differ from the
	// specs.
	ExitDrift = status.ExitDrift
	// ExitDeadLettersStuck: status --exit-code found a wait queue that
	// held dead-letters and forwarded none of them within --held-margin.
	// It ranks after 5 and before 6 (docs/exit-codes.md says why).
	ExitDeadLettersStuck = status.ExitDeadLettersStuck
	// ExitUpgradeRefused: upgrade preview found what the target release
	// refuses (verdicts of severity error).
	ExitUpgradeRefused = 8
	// ExitUpgradeWarnings: upgrade preview --detailed-exitcode found only
	// what the target ignores or does differently.
	ExitUpgradeWarnings = 9
)
