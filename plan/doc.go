// Package plan computes and checks the changes that take a live broker to a
// desired topology.
//
// A Plan is a plain data value: ordered Changes, each an Action on one
// Address with the object Before and After. Diff computes it purely, with no
// context and no I/O; Check is a separate pass that returns coded
// diagnostics (messages at stake, consumers attached, draining wait
// queues); rendering and apply only consume it. Reason is for display only:
// nothing branches on it.
//
// # Rules
//
// Exchanges and queues are immutable in RabbitMQ: any difference in type,
// flags or arguments is a replace (delete, then create), which drops every
// binding touching the object, so the plan re-creates the desired ones in the
// same apply. Policies are updated in place, which is why rmqtopo carries
// the mutable attributes of its queues in policies of its own (see
// policy.go): a live queue whose leftover arguments give the same effective
// values as the desired queue with its policy is kept (adopted), not
// replaced. Bindings are their own identity
// and are only created or deleted; rmqtopo removes the stale bindings of the
// exchanges it owns, which is how a retry schedule change moves the retry
// exchange from the old wait queues to the new ones. Vhosts are only ever
// created.
//
// Nothing is deleted unless the spec's ownership record owns it and no
// other spec's record claims it (topology.OwnershipFor), it lies in a vhost
// the spec describes, and it is not the broker's ("" or amq.*). Each
// delete's Owner names the record; a source that cannot show records marks
// its deletes WhyMayDelete.
// Owned objects that left the spec are deleted only with Prune, except
// retired wait queues: they are deleted once empty and kept (a draining
// NoOp) while messages still wait in them, with or without Prune, because
// waiting loses nothing and their TTL bounds the wait. A retired delay
// ladder is kept whole while any of its level queues drains (see
// keepDrainingLadders).
//
// A replace of a queue may instead be a migration (Migrate, see
// Migration), chosen per queue or for all: the queue's messages are moved
// to a temporary queue and back around the re-creation, so nothing is
// destroyed and Check does not block it. A migration in progress (its
// temporary queue, contract.MigrationQueue, exists) is resumed by every
// plan, whatever was chosen, and its temporary queue is never planned as
// an object of its own.
//
// Changes are ordered for apply: vhost creates; policy, exchange, queue and
// binding creates, replaces and updates in that order; then deletes of
// bindings, queues, exchanges and policies. Within a group, by address.
//
// # Diagnostics
//
// Check runs a list of analyzers (ownership, broker, destructive,
// policies, version, access; see check.go), each over the whole plan, and
// reports in plan order within each. Every code is registered in Codes
// (codes.go) with its severity, whether --allow-destroy accepts it and
// whether the broker itself would refuse the change; Check takes the
// severity from there.
//
//	Code   Severity                      Meaning
//	RT001  error (warning when allowed)  replacing a queue destroys the messages it holds
//	RT002  error (warning when allowed)  deleting a queue destroys the messages it holds
//	RT003  error (warning when allowed)  a queue replace or delete with an unknown message count
//	RT004  info                          a retired wait queue is kept while it drains
//	RT005  warning                       an exchange replace: publishers may see unroutable
//	                                     messages between delete and create
//	RT006  error (warning when allowed)  a queue replace or delete while consumers are attached,
//	                                     which may hold unacknowledged deliveries
//	RT007  error                         two specs' records want one object with different attributes
//	RT008  warning                       the source shows no ownership record; deletes are "? may delete"
//	RT009  error                         a policy key RabbitMQ (this version) does not accept
//	RT010  error                         a binding's source or destination exists nowhere, or is a
//	                                     reserved amq.* name that is not a built-in exchange
//	RT011  error                         a queue type or argument the version or queue type lacks
//	RT012  error                         (with CheckOptions.Access) a change the user may not make
//	RT013  warning                       a queue this spec owned left the spec and is kept (no
//	                                     --prune): its exact message count, and how to remove it
//	RT014  info                          retired: a hand-made queue the spec retires is kept while
//	                                     it may hold messages; pruned once empty (retire.go)
//	RT020  warning                       a user policy matches queues whose rmqtopo policy wins:
//	                                     its keys do not apply to them
//	RT021  error (warning when allowed)  a user policy wins over (or ties with) rmqtopo's policy
//	                                     of queues: rmqtopo's dead-lettering and limits do not apply
//	RT022  info                          an operator policy caps a limit below rmqtopo's policy
//	RT023  info                          an adopted queue keeps arguments its policy now carries
//	RT024  info                          a user policy applies to queues without an rmqtopo policy
//	RT025  info                          queues an earlier rmqtopo made keep their policy shape
//	RT030  info                          a queue migration: the messages it moves, the unroutable
//	                                     window of the default exchange, consumers cancelled
//	RT031  warning                       an unfinished migration's temporary queue holds messages
//	                                     of a queue no longer in the spec
//
// The version analyzer judges by the one version of the plan
// (Plan.RabbitMQ, see JudgeVersion), which the other analyzers use too,
// with the facts of topology.VersionTable (version.go):
//
//	RT101  warning  4.0+: a quorum queue that delivers to consumers, without a delivery
//	                limit (argument or policy), gets the default of 20
//	RT102  info     4.0+: the broker ignores x-death published by clients
//	RT103  error    4.3+: x-queue-version 1 or x-queue-master-locator, refused by
//	                the broker (the last by default)
//	RT104  error    a transient non-exclusive queue, where the broker denies it
//	RT105  info     3.12+: x-queue-mode, which the broker ignores
//	RT106  error    below 4.3.1: a queue of layout native, whose retries the broker
//	                would not delay (native.go)
//	RT108  warning  a key, argument or transient queue the broker accepts only by
//	                a default operators can change, or only with a plugin the
//	                source cannot show
//
// The layout analyzer notes the live queues that keep their layout where
// auto gives a new queue another (CheckOptions.Kept), and how the retries
// of the queues whose route the plan makes travel (CheckOptions.Routes):
//
//	RT107  info     a live queue keeps its layout; the line says how to move it
//	RT109  error    the spec asks of a live queue whose layout auto keeps what that
//	                layout cannot do (delivery_limit or a return queue on a native
//	                queue); the line says how to fix the spec
//	RT110  info     how the retries of a work queue the plan creates (or whose route
//	                it changes) travel, and whether RetryAfter is honoured there
//	RT111  info     beside RT110, where a return queue holds the retries for
//	                retry.Consume: what a consumer that is not Consume sees
//
// "Allowed" is CheckOptions.AllowDestroy (the caller's acceptance of destruction; the CLI names its flag). Blocking
// returns the error-severity diagnostics, which must stop an apply.
package plan
