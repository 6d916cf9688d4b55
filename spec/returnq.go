package spec

import (
	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/topology"
)

// ReturnTo is the queue q's delayed retries come back into: its return
// queue (contract.ReturnQueue) when the spec asks for one, else q itself.
func ReturnTo(q Queue) string {
	on := q.ReturnQueue
	if q.res.set {
		on = q.res.returnQueue
	}
	if on && q.Preset == PresetNone && !q.Raw {
		return contract.ReturnQueue(q.Name)
	}
	return q.Name
}

// returnQueue adds q's return queue: of q's type, with a TTL of
// contract.ReturnQueueHandover after which a retry no consumer took moves
// on to the back of q (at least once on a quorum queue). Everything is a
// queue argument: nothing about it is meant to change.
func (b *builder) returnQueue(q Queue) {
	if ReturnTo(q) == q.Name {
		return
	}
	args := b.typeArgs(q.Type)
	args["x-message-ttl"] = contract.ReturnQueueHandover.Milliseconds()
	deadLetterTo(args, "", &q.Name)
	b.addQueue(topology.Queue{Name: contract.ReturnQueue(q.Name), Arguments: args}, b.generated(q, "return queue"))
}

// checkReturnQueue refuses a return queue where the retries' route is not
// rmqtopo's: a preset's library decides where its retries come back.
func (b *builder) checkReturnQueue(q Queue) {
	if q.ReturnQueue && q.Preset != PresetNone {
		at, _ := q.set.get(keyReturnQueue)
		b.errorf(at, "return_queue is not part of the %s preset's contract: its library decides where retries come back", q.Preset)
	}
}
