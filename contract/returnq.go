package contract

import "time"

// ReturnQueue names the return queue of work queue queue ("Q.return"),
// which a spec creates with `return_queue: true`. Delayed retries come
// back into it instead of the back of Q, so that a consumer that serves it
// ahead of Q (retry.Consume does) sees them when their delay is over, not
// after Q's backlog.
//
// It routes like this:
//
//   - per-attempt: the wait queues are PerAttemptWaitQueue(ReturnQueue(Q),
//     n, delay) and name ReturnQueue(Q) as their x-dead-letter-routing-key.
//     Turning the return queue on creates them beside Q's own wait queues,
//     which drain into Q as retired wait queues do; no queue is replaced.
//   - shared: the wait queue keeps the routing key of the retry publish,
//     so a client publishes its retry copies with routing key
//     ReturnQueue(Q) once the queue exists (retry.New checks), and with Q
//     otherwise. A copy published with Q still comes back to Q.
//   - levels: the delay ladder's delivery exchange binds Q's delivery
//     pattern (Ladder.DeliveryPattern(Q)) to ReturnQueue(Q) instead of Q.
//
// No retry is stranded there: the return queue has a TTL of
// ReturnQueueHandover and dead-letters to "" with routing key Q, so a
// message no consumer took in that time moves to the back of Q, where a
// consumer that reads only Q gets it, as it would without a return queue.
// Its x-death then names the wait queue and the return queue, never Q,
// so the broker's cycle rule does not fire.
func ReturnQueue(queue string) string { return queue + ".return" }

// ReturnQueueHandover is the return queue's x-message-ttl: how long a
// retry waits there for a consumer of the return queue before it moves on
// to the back of its work queue. A delivered (unacked) message does not
// expire, so it bounds only the wait of retries nobody is serving: a
// service without the helper's return-queue consumer sees every retry
// this much later than its delay, plus the backlog of Q.
const ReturnQueueHandover = 5 * time.Second
