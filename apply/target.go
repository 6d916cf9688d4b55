package apply

import (
	"context"

	"github.com/rmqtopo/rmqtopo/topology"
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
	// bindings as they were, and the error is one that Options.IsNotEmpty
	// recognises. q is the queue as the plan saw it; its arguments tell
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
