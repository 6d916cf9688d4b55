package ops

import "time"

// Shown is what dlq show read: the head of a queue.
type Shown struct {
	Vhost string `json:"vhost"`
	Queue string `json:"queue"`
	Type  string `json:"type"`
	// ReadIsDelivery: reading was a counted delivery of each message read
	// (a quorum queue's: x-delivery-count before RabbitMQ 4.3,
	// x-acquired-count from 4.3).
	ReadIsDelivery bool      `json:"read_is_delivery"`
	Depth          int       `json:"depth"`
	Messages       []Message `json:"messages"`
}

// Message is a dead-lettered message decoded for an operator: why it failed,
// how often, and where it came from, read from the contract's headers first
// and from the broker's dead-lettering headers when those are missing.
type Message struct {
	// Position is the message's 1-based position in the queue when it was read.
	Position      int        `json:"position"`
	MessageID     string     `json:"message_id,omitempty"`
	CorrelationID string     `json:"correlation_id,omitempty"`
	Timestamp     *time.Time `json:"timestamp,omitempty"`
	ContentType   string     `json:"content_type,omitempty"`
	// Exchange and RoutingKey are those of the delivery from this queue.
	Exchange    string `json:"exchange"`
	RoutingKey  string `json:"routing_key"`
	Redelivered bool   `json:"redelivered"`
	// DeliveryCount is a quorum queue's x-delivery-count, nil when absent.
	DeliveryCount *int64 `json:"delivery_count,omitempty"`

	// Reason is why the message was dead-lettered; ReasonSource says which
	// header told: "header" (contract.HeaderDeadLetterReason), "x-death",
	// "attempt" (an attempt header and no reason: retries exhausted) or "".
	Reason       string `json:"reason"`
	ReasonSource string `json:"reason_source"`
	// Attempt is contract.HeaderAttempt, nil when absent; AttemptRaw keeps a
	// value that is not a valid attempt.
	Attempt    *int   `json:"attempt,omitempty"`
	AttemptRaw string `json:"attempt_raw,omitempty"`
	// Deaths is the x-death count (see ops.ReadDeaths); DeathsUnreadable
	// says why it could not be read.
	Deaths           int64  `json:"deaths"`
	DeathsUnreadable string `json:"deaths_unreadable,omitempty"`
	FirstFailure     string `json:"first_failure,omitempty"`
	LastError        string `json:"last_error,omitempty"`
	// OriginalExchange and OriginalRoutingKey are where the message was first
	// published.
	OriginalExchange   string `json:"original_exchange"`
	OriginalRoutingKey string `json:"original_routing_key"`
	ReplayCount        int64  `json:"replay_count,omitempty"`

	Size int `json:"size"`
	// Body is the payload, as text when it is valid UTF-8 and in base64
	// otherwise (BodyEncoding says which).
	Body         string         `json:"body"`
	BodyEncoding string         `json:"body_encoding"`
	Headers      map[string]any `json:"headers,omitempty"`
}
