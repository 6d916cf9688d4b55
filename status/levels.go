package status

import (
	"time"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/spec"
)

// levelRows returns, when via is the entry of the delay ladder q's
// retries go through, one wait row per level queue, highest first: a
// retry may wait in any of them, so the rows carry each level's number
// and TTL and no retry numbers. The messages per level show where delayed
// messages are; a message in level k is due in at most 2^(k+1)-1
// resolution steps.
func levelRows(s *spec.Spec, q spec.Queue, via string) ([]QueueStatus, bool) {
	l, ok := s.Ladder()
	if !ok || q.Preset != spec.PresetNone || via != l.EntryExchange() {
		return nil, false
	}
	rows := make([]QueueStatus, 0, l.Levels)
	for k := l.Levels - 1; k >= 0; k-- {
		rows = append(rows, QueueStatus{Name: l.LevelQueue(k), Role: RoleWait, Delay: contract.FormatDelay(l.TTL(k)),
			Level: &k, DueWithin: dueWithin(l, k).String()})
	}
	return rows, true
}

// dueWithin is the longest a message in level k of l waits yet: this
// level's TTL and every lower one's.
func dueWithin(l contract.Ladder, k int) time.Duration {
	return l.Resolution * time.Duration(uint64(1)<<(k+1)-1)
}
