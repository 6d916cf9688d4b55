// Package move is rmqtopo's one engine for moving messages between queues
// without losing any. ops.Pass (dlq show, replay, sweep) is a thin layer
// over its Pass, and internal/broker's Session.Move (the moves of a
// migration) is a Pass with UntilEmpty. It depends on amqp091-go and the
// standard library only, so that both can use it.
//
// A message to move is published to the target through the default
// exchange, persistent and mandatory, on a channel in confirm mode, and
// acknowledged in its source only after the broker confirmed the copy: a
// crash at any point leaves each message in the source, in the target, or
// (confirmed, not yet acknowledged) in both, never in neither. Confirms are
// pipelined up to the window, and confirmed moves are acknowledged a
// hundred at a time with one multiple ack when nothing the pass holds lies
// between them, one by one otherwise. A copy returned as unroutable, nacked
// or not confirmed in time stops the moves: its source, and every source
// not yet acknowledged, stays in the queue.
//
// A move until empty ends once its source is drained: no ready message,
// and no delivery on its way, which it learns by cancelling its consumer
// and moving what reached it before basic.cancel-ok (see consumer.drain).
//
// Messages keep their order: one channel, publishes in delivery order.
// Messages a pass leaves in place are held unacknowledged and requeued in
// order at its end; ops's package documentation says how, and why, per
// queue type.
package move
