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
// Nothing is deleted unless the broker records it as rmqtopo's own, it lies
// in a vhost the spec describes, and it is not the broker's ("" or amq.*).
// Owned objects that left the spec are deleted only with Prune, except
// retired wait queues: they are deleted once empty and kept (a draining
// NoOp) while messages still wait in them, with or without Prune, because
// waiting loses nothing and their TTL bounds the wait.
//
// Changes are ordered for apply: vhost creates; policy, exchange, queue and
// binding creates, replaces and updates in that order; then deletes of
// bindings, queues, exchanges and policies. Within a group, by address.
//
// # Diagnostics
//
// Check reports, in plan order:
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
//	RT020  warning                       a user policy matches queues whose rmqtopo policy wins:
//	                                     its keys do not apply to them
//	RT021  error (warning when allowed)  a user policy wins over (or ties with) rmqtopo's policy
//	                                     of queues: rmqtopo's dead-lettering and limits do not apply
//	RT022  info                          an operator policy caps a limit below rmqtopo's policy
//	RT023  info                          an adopted queue keeps arguments its policy now carries
//
// "Allowed" is CheckOptions.AllowDestroy (the --allow-destroy flag). Blocking
// returns the error-severity diagnostics, which must stop an apply.
package plan
