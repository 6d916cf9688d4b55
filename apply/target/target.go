// Package target is the broker as apply sees it: the interfaces an apply
// writes and locks through, and the kinds of error they promise. It
// imports only the model, so that a broker implementation can implement
// it without reaching up into apply or plan.
package target

import (
	"context"
	"errors"

	"github.com/rmqtopo/rmqtopo/topology"
)

// Kinds of error a Target or Locker returns, for errors.Is. An
// implementation wraps them (its own error kinds may be these very
// values), so that apply branches on them and never on message text.
var (
	// ErrNotEmpty: a guarded queue delete (DeleteQueue with ifEmpty) kept
	// the queue, because it holds messages or has consumers.
	ErrNotEmpty = errors.New("queue not empty")
	// ErrLocked: another apply holds the vhost's lock.
	ErrLocked = errors.New("resource locked")
	// ErrVhostNotFound: the vhost does not exist, so there is nothing to
	// lock.
	ErrVhostNotFound = errors.New("vhost not found")
)

// Target is the broker as apply sees it.
//
// Every method is idempotent: declaring an object that exists with the same
// properties succeeds and changes nothing; deleting an object that does not
// exist succeeds. Declaring an object that exists with other properties
// fails (RabbitMQ's exchanges and queues are immutable); the plan replaces
// such objects instead. Errors are returned without naming the object:
// Apply adds that. Methods are called concurrently.
type Target interface {
	// PutVhost creates a vhost.
	PutVhost(ctx context.Context, vhost string) error
	// DeclareExchange declares an exchange.
	DeclareExchange(ctx context.Context, e topology.Exchange) error
	// DeclareQueue declares a queue.
	DeclareQueue(ctx context.Context, q topology.Queue) error
	// Bind creates a binding; bindings are a set, so binding twice is one
	// binding.
	Bind(ctx context.Context, b topology.Binding) error
	// Unbind deletes a binding.
	Unbind(ctx context.Context, b topology.Binding) error
	// PutPolicy creates or updates a policy.
	PutPolicy(ctx context.Context, p topology.Policy) error
	// DeletePolicy deletes a policy.
	DeletePolicy(ctx context.Context, vhost, name string) error
	// DeleteExchange deletes an exchange and the bindings touching it.
	DeleteExchange(ctx context.Context, vhost, name string) error
	// DeleteQueue deletes a queue and its bindings. With ifEmpty, a queue
	// that holds messages (or, where the implementation can tell, has
	// consumers that may hold unacknowledged ones) is kept, with its
	// bindings as they were, and the error wraps ErrNotEmpty. q is the queue as the plan saw it; its arguments tell
	// the implementation its type.
	DeleteQueue(ctx context.Context, q topology.Queue, ifEmpty bool) error
	// PutRecord writes a spec's ownership record in its vhost, as the
	// next generation: the record is whole, not a change to the last one.
	PutRecord(ctx context.Context, r topology.Record) error
}

// Migrator is a Target that can migrate a queue (plan.Migrate): re-create
// it with after's properties without losing its messages, through the
// temporary queue contract.MigrationQueue. Like every Target operation it
// is idempotent: it reads where an interrupted migration stands from the
// broker and finishes it.
type Migrator interface {
	MigrateQueue(ctx context.Context, after topology.Queue) error
}

// Drainer is a Target that can wait for queues to drain: until each of
// names in vhost holds nothing, ready or held back, or until that has
// taken longer than the queue's own TTL allows, when the error wraps
// ErrNotEmpty. Apply waits so for the retired queues that dead-letter into
// a queue by name before migrating it (plan.Details.WaitFor).
type Drainer interface {
	WaitDrained(ctx context.Context, vhost, into string, names []string) error
}

// Locker takes a vhost's apply lock, held for as long as the Locker lives.
// Lock fails at once with an error wrapping ErrLocked while another apply
// holds it, and with one wrapping ErrVhostNotFound when the vhost does not
// exist. Locking a vhost already locked by this Locker succeeds.
type Locker interface {
	Lock(ctx context.Context, vhost string) error
}
