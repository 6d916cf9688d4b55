// Package ops moves and shows the messages of live queues: it reads dead
// letters in place (peek) and moves them (replay, sweep) without losing
// any. It knows nothing of specs or plans; the queues it works on come
// from internal/broker's listing, and the status of a spec's queues is
// the status package's.
//
// # Moves
//
// Every move is a Pass over one queue, run by internal/move, the engine
// migrations use too. A message to move is published to the target queue
// through the default exchange, persistent and mandatory, on a channel in
// confirm mode, and acked in the source only after the broker confirmed
// the copy. A copy that is nacked, returned as unroutable, or not
// confirmed in time leaves its source unacked, and so in the queue, and
// stops the moves: a return does not say which publish it answers, so no
// later confirm can be trusted. A crash at any point leaves at most one
// extra copy per message (confirmed but not yet acked), never a loss.
//
// # Leaving messages in place, in order
//
// AMQP cannot skip a message without taking it. A pass holds the messages
// it leaves unacknowledged until its end, then requeues them one by one in
// delivery order. What "in place" means depends on the queue, as seen on
// RabbitMQ 3.10.8:
//
//   - A classic queue puts a requeued message back at its position, so a
//     pass may stop early (a limit reached) and requeue just what it took.
//   - A quorum queue puts a requeued (nacked) message at its tail. A pass
//     over a quorum queue therefore takes the whole queue, up to its depth
//     when the pass starts, even after it stopped acting, and requeues it
//     all in order, so that the order is the same afterwards. Messages that
//     arrive during the pass end up ahead of the older ones.
//   - A quorum queue applies one consumer's requeues in order but those of
//     several consumers in no particular order, and settles acks and
//     requeues lazily: a channel closed too early gets unsettled messages
//     back out of order, and acked ones back as duplicates. So a pass
//     requeues consumer by consumer, waits until the queue shows each
//     consumer's requeues applied, and closes its channel only once the
//     queue stopped counting its consumers, which it does when every ack
//     and requeue is settled.
//   - Every requeue is a redelivery: the redelivered flag is set, and a
//     quorum queue counts it, in x-delivery-count before RabbitMQ 4.3 and in
//     x-acquired-count from 4.3. CheckLeaveSafe refuses quorum queues whose
//     delivery limit could make a requeue drop messages.
//
// Memory is bounded by the window (the consumer prefetch): when a consumer
// holds a full window of messages left in place, it is cancelled, its
// deliveries stay held, and a new consumer takes the next window. Only
// delivery tags are kept for held messages.
//
// # Death counts
//
// ReadDeaths reads x-death defensively: the count of a message is the sum
// of count over every entry, whatever queue it names; a header that is not
// an array of tables each with a non-negative integer count is unreadable,
// and a sweep leaves such messages in place and reports them.
package ops
