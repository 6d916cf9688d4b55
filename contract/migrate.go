package contract

import "strings"

// MigrationSuffix ends the name of the temporary queue that holds a queue's
// messages while rmqtopo migrates it: recreates it with properties that
// cannot change in place (type, durability, a pinned argument). A queue
// named so is rmqtopo's while it exists: its existence is the record that
// a migration is in progress, and the next plan resumes it.
const MigrationSuffix = ".rmqtopo-migrate"

// MigrationQueue names the temporary queue of the migration of queue q.
func MigrationQueue(q string) string { return q + MigrationSuffix }

// ParseMigrationQueue returns the queue whose migration name is the given
// one, and whether it is one.
func ParseMigrationQueue(name string) (queue string, ok bool) {
	q, ok := strings.CutSuffix(name, MigrationSuffix)
	if !ok || q == "" {
		return "", false
	}
	return q, true
}
