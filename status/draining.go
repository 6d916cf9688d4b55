package status

import (
	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/plan"
)

// draining is the row of a retired wait queue that plan keeps while it
// drains (c, plan's RT004): its delay read from its name, its counts from
// the queue listing, or, when the listing does not have it (yet), the
// messages plan read. Its messages are retries in flight; they count in
// the summary apart from the wait queues the specs use.
func (b *builder) draining(c plan.Change) DrainingQueue {
	row := QueueStatus{Name: c.Address.Name, Role: RoleWait, Flags: []string{FlagDraining}}
	if w, ok := contract.ParseWaitQueue(row.Name); ok && w.Delay > 0 {
		row.Delay = contract.FormatDelay(w.Delay)
	}
	if l, k, err := contract.ParseLevelQueue(row.Name); err == nil {
		row.Delay, row.Level, row.DueWithin = contract.FormatDelay(l.TTL(k)), &k, dueWithin(l, k).String()
	}
	if info, ok := b.stats[vhostQueue{c.Address.Vhost, row.Name}]; ok {
		row.Present = true
		row.Messages, row.Ready, row.Unacked = info.Messages, info.Ready, info.Unacked
		row.Consumers, row.PublishRate, row.DeliverRate = info.Consumers, info.PublishRate, info.DeliverRate
		row.Delayed = info.Delayed
	} else if n := c.Messages(); n != nil {
		row.Present, row.Messages = true, *n
	}
	b.st.Summary.RetiredDraining++
	b.st.Summary.RetiredMessages += row.Messages
	return DrainingQueue{Vhost: c.Address.Vhost, QueueStatus: row}
}
