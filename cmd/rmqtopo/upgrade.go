package main

// upgradeCmd groups the commands of a blue-green upgrade (issue 42,
// docs/upgrades.md).
type upgradeCmd struct {
	Move upgradeMoveCmd `cmd:"" help:"Move every message of the specs' queues from the old (blue) broker to the new (green) one, retries at their time and attempt."`
}
