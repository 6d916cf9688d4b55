package status

import "github.com/rmqtopo/rmqtopo/contract"

// withMigrations adds, after each queue of rows whose migration is in
// progress, the row of its temporary queue, which holds its messages
// meanwhile: a status taken during a migration (or after one was
// interrupted) shows where the messages are.
func (b *builder) withMigrations(vhost string, rows []QueueStatus) []QueueStatus {
	out := make([]QueueStatus, 0, len(rows))
	for _, row := range rows {
		out = append(out, row)
		temp := contract.MigrationQueue(row.Name)
		if _, ok := b.stats[vhostQueue{vhost, temp}]; ok {
			out = append(out, QueueStatus{Name: temp, Role: RoleMigration})
		}
	}
	return out
}
