package spec

import "github.com/rmqtopo/rmqtopo/contract"

// DLQOf names q's DLQ: its dlq_name, or contract.DeadLetterQueue(q.Name).
// Only the name changes: the DLQ is still fed by the fanout
// contract.DeadLetterExchange(q.Name), which is what the runtime helper
// and the work queue's dead-lettering point at, so a DLQ made by hand
// under another name keeps its name, and its messages, when adopted.
func DLQOf(q Queue) string {
	if q.DLQName != "" {
		return q.DLQName
	}
	return contract.DeadLetterQueue(q.Name)
}

// checkDLQName refuses a dlq_name where it names nothing rmqtopo makes:
// without a DLQ, or on a preset, whose library names its DLQ itself. A
// name that collides with another queue is refused where the DLQ is
// added, as any generated name is.
func (b *builder) checkDLQName(q Queue) {
	if q.DLQName == "" {
		return
	}
	switch {
	case !q.DLQ:
		b.errorf(q.dlqNameAt, "dlq_name needs a DLQ: this queue has dlq: false")
	case q.Preset != PresetNone:
		b.errorf(q.dlqNameAt, "dlq_name does not apply to a queue with preset %s: its library names the DLQ %q", q.Preset, contract.DeadLetterQueue(q.Name))
	}
}
