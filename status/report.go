package status

import "github.com/rmqtopo/rmqtopo/plan"

// Roles of a queue in a work queue's retry topology.
const (
	RoleWork       = "work"
	RoleWait       = "wait"
	RoleDLQ        = "dlq"
	RoleParkingLot = "parking-lot"
	// RoleMigration is the temporary queue of a migration in progress
	// (contract.MigrationQueue): it holds the queue's messages until the
	// migration, resumed by the next apply, moves them back.
	RoleMigration = "migration"
	// RoleReturn is a work queue's return queue (contract.ReturnQueue): its
	// ready messages are retries whose delay is over, waiting to be picked up.
	RoleReturn = "return"
)

// Flags status raises on a queue.
const (
	FlagDLQNotEmpty = "dlq-not-empty"
	FlagNoConsumers = "no-consumers"
	FlagMissing     = "missing"
	FlagDrift       = "drift"
	FlagMigrating   = "migration-in-progress"
	// FlagHeld marks a wait queue holding expired messages that the broker
	// has not yet dead-lettered to their work queue: a quorum queue's
	// at-least-once dead-lettering waits for the target to confirm, which
	// after a node loss can take the broker's
	// dead_letter_worker_publisher_confirm_timeout (docs/operations.md).
	FlagHeld = "dead-letters-held"
	// FlagStuck marks a wait queue that held dead-letters and forwarded none
	// of them while status re-read it for the held margin: its oldest held
	// dead-letter has waited at least its TTL plus the margin.
	FlagStuck = "dead-letters-stuck"
	// FlagReturnNotServed marks a return queue holding retries with no
	// consumer: no retry.Consume serves it, so each waits out
	// contract.ReturnQueueHandover before it moves on to the back of its work
	// queue.
	FlagReturnNotServed = "return-not-served"
	// FlagDraining marks a retired wait queue: no queue of the specs uses
	// it any more, but it still holds retries in flight, which expire
	// back into their work queue by themselves; a later apply deletes it
	// once it is empty (plan's info RT004).
	FlagDraining = "retired-draining"
)

// FormatVersion is the version of Report's JSON form.
const FormatVersion = 1

// QueueStatus is one queue of a work queue's topology as the broker sees it.
type QueueStatus struct {
	Name string `json:"name"`
	Role string `json:"role"`
	// Delay and Retries describe a wait queue: the delay, and the retry
	// numbers that wait in it (1 for the first retry, whose messages carry
	// contract.HeaderAttempt "2").
	Delay   string `json:"delay,omitempty"`
	Retries []int  `json:"retries,omitempty"`
	// Level is, for a level queue of a delay ladder (the levels layout),
	// its level k: it holds a message for Delay = resolution × 2^k when
	// bit k of the message's delay is set, so no fixed retry waits in it
	// and Retries is empty. DueWithin bounds when a message in it is due:
	// this level's TTL plus every lower one's, (2^(k+1) − 1) × resolution.
	Level     *int   `json:"level,omitempty"`
	DueWithin string `json:"due_within,omitempty"`
	// Shared is set on a wait queue other work queues of the vhost also use,
	// whose counts are therefore theirs too.
	Shared   bool  `json:"shared,omitempty"`
	Present  bool  `json:"present"`
	Messages int64 `json:"messages"`
	Ready    int64 `json:"messages_ready"`
	Unacked  int64 `json:"messages_unacknowledged"`
	// Held is, for a wait queue, the dead-letters waiting to be forwarded
	// (broker.QueueInfo.DeadLettersHeld: messages_dlx, or the messages
	// counted but neither ready nor delivered).
	Held int64 `json:"dead_letters_held,omitempty"`
	// Delayed is, where the broker counts it (quorum queues from RabbitMQ
	// 4.3), the returned deliveries the queue itself holds back until
	// their delay is over (its delayed retry, x-delayed-retry-type): on a
	// work queue, retries waiting inside it. Nil where it is not counted.
	Delayed *int64 `json:"messages_delayed,omitempty"`
	// Stuck is, for a wait queue flagged FlagStuck, the dead-letters it
	// held at the last reading of the held margin.
	Stuck       int64    `json:"dead_letters_stuck,omitempty"`
	Consumers   int64    `json:"consumers"`
	PublishRate float64  `json:"publish_rate"`
	DeliverRate float64  `json:"deliver_rate"`
	Flags       []string `json:"flags,omitempty"`
	// Drift says how the queue differs from the spec.
	Drift []string `json:"drift,omitempty"`
}

// WorkQueueStatus is a work queue of a spec and the queues around it.
type WorkQueueStatus struct {
	Vhost  string        `json:"vhost"`
	File   string        `json:"file"`
	Queue  string        `json:"queue"`
	Queues []QueueStatus `json:"queues"`
}

// DriftItem is one object that differs from the spec.
type DriftItem struct {
	Action  plan.Action `json:"action"`
	Address string      `json:"address"`
	Reason  string      `json:"reason,omitempty"`
}

// Report is the status of every queue of a set of specs.
type Report struct {
	FormatVersion int               `json:"format_version"`
	Queues        []WorkQueueStatus `json:"work_queues"`
	// DriftChecked is false when the live topology was not read; Drift
	// then says nothing.
	DriftChecked bool `json:"drift_checked"`
	// Drift lists the exchanges, bindings, policies and vhosts that differ
	// from the spec; queues carry their own.
	Drift []DriftItem `json:"drift,omitempty"`
	// Draining lists the retired wait queues kept while they drain
	// (FlagDraining), as plan finds them; read with the drift, so empty
	// when DriftChecked is false.
	Draining []DrainingQueue `json:"retired_draining,omitempty"`
	// HeldMargin is how long status re-read the wait queues that held
	// dead-letters (status --exit-code); empty when it did not.
	HeldMargin string  `json:"held_margin,omitempty"`
	Summary    Summary `json:"summary"`
}

// Summary counts what status flags.
type Summary struct {
	DLQsNotEmpty      int   `json:"dlqs_not_empty"`
	DLQMessages       int64 `json:"dlq_messages"`
	WithoutConsumers  int   `json:"work_queues_without_consumers"`
	MissingQueues     int   `json:"missing_queues"`
	DriftedObjects    int   `json:"drifted_objects"`
	MessagesInRetries int64 `json:"messages_in_wait_queues"`
	// Migrations counts the migrations in progress: their temporary
	// queues exist.
	Migrations int `json:"migrations_in_progress,omitempty"`
	// DeadLettersHeld counts the expired messages wait queues hold until
	// their work queue confirms them (FlagHeld).
	DeadLettersHeld int64 `json:"dead_letters_held,omitempty"`
	// WaitQueuesStuck counts the wait queues that forwarded none of their
	// held dead-letters within the held margin (FlagStuck), and
	// DeadLettersStuck what they held at the last reading.
	WaitQueuesStuck  int   `json:"wait_queues_stuck,omitempty"`
	DeadLettersStuck int64 `json:"dead_letters_stuck,omitempty"`
	// RetriesWaiting counts the ready messages of return queues: retries
	// whose delay is over, waiting to be picked up (RoleReturn).
	RetriesWaiting int64 `json:"retries_waiting,omitempty"`
	// RetriesDelayed counts the retries waiting inside work queues, held
	// back by the broker's delayed retry (QueueStatus.Delayed).
	RetriesDelayed int64 `json:"retries_delayed_in_queues,omitempty"`
	// RetiredDraining counts the retired wait queues still draining, and
	// RetiredMessages the messages they hold: retries in flight.
	RetiredDraining int   `json:"retired_wait_queues_draining,omitempty"`
	RetiredMessages int64 `json:"messages_in_retired_wait_queues,omitempty"`
}

// DrainingQueue is a retired wait queue of a vhost, kept while it drains.
type DrainingQueue struct {
	Vhost string `json:"vhost"`
	QueueStatus
}

// DLQHasMessages reports whether any DLQ of the status holds messages.
func (s Report) DLQHasMessages() bool { return s.Summary.DLQsNotEmpty > 0 }
