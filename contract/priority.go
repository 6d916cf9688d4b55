package contract

// RetryPriority is the least message priority of a retry: the retry
// helper publishes every retry copy (and Delayer every delayed message)
// with it, or with the message's own priority where that is higher, so
// that on a RabbitMQ 4.0+ quorum queue a retry whose delay is over comes
// back ahead of the queue's backlog to every consumer, without a return
// queue.
//
// Why 9: RabbitMQ 4.0's quorum queues have two levels, high for a
// priority above 4 (delivered two for one normal, rabbit_fifo_q.erl's
// WEIGHT at v4.0.5); 4.3 has 32 strict levels, 0 to 31, with 4 for a
// message without one (rabbit_fifo.erl DEFAULT_PRIORITY, rabbit_fifo_pq.erl
// at v4.3.0), so 9 is ahead of every message published without a
// priority, and 9 is the top of AMQP 0-9-1's suggested 0-9 range. Neither
// needs a queue argument (both refuse x-max-priority on a quorum queue);
// 3.x quorum queues and classic queues without x-max-priority ignore it
// (probed live on 3.10.8, 4.0.5 and 4.3.6, see docs/versions.md).
const RetryPriority uint8 = 9

// RetryPriorityOf is the priority of a retry of a message of priority p.
func RetryPriorityOf(p uint8) uint8 { return max(p, RetryPriority) }
