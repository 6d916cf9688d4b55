// Package e2e holds rmqtopo's end-to-end tests. It has no code outside its
// tests.
//
// The tests take every example spec shipped in examples/ and
// examples/presets/ (found by glob, so a new example is covered without
// touching the tests), point it at a vhost of their own, scale its retry
// delays down to fractions of a second, render its definitions and import
// them into the real RabbitMQ node of internal/brokertest. They then drive
// one message through each work queue's retry chain the way a service
// would: through package contract's retry exchange for rmqtopo's own
// topology, or in the dialect of the library a preset imitates (goqueue,
// outbox, spring). Each delivery must come back to its own queue, through
// the wait queue the schedule names, no earlier than its delay; after the
// last attempt the message must land in the queue's DLQ, and at the end
// exactly one copy of it may exist in the whole vhost, so a message that
// RabbitMQ dropped as a dead-letter cycle, or copied into a queue sharing a
// wait queue, fails the test.
package e2e
