package status

import "github.com/rmqtopo/rmqtopo/spec"

// returnRows is q's return queue row, if the spec gives it one.
func returnRows(q spec.Queue) []QueueStatus {
	if back := spec.ReturnTo(q); back != q.Name {
		return []QueueStatus{{Name: back, Role: RoleReturn}}
	}
	return nil
}

// countReturn counts a return queue row's waiting retries in the summary
// and flags them when nothing serves the queue.
func (b *builder) countReturn(row *QueueStatus) {
	b.st.Summary.RetriesWaiting += row.Ready
	if row.Consumers == 0 && row.Messages > 0 {
		row.Flags = append(row.Flags, FlagReturnNotServed)
	}
}
