package spec

// queueArgumentsSchema is the schema's $defs/queueArguments: the queue
// arguments RabbitMQ knows (topology's key table, which
// TestSchemaArgumentsAreTheKeyTable holds it to) with a title and a
// description each, for editors.
const queueArgumentsSchema = `"title": "Queue arguments", "description": "x-arguments RabbitMQ knows, with the values it accepts; an unknown x- name is refused (RabbitMQ would ignore it silently). Set the queue type with type, not x-queue-type. Names without the x- prefix pass as written.", "type": "object", "properties": {
	"x-consumer-disconnected-timeout": {"title": "Consumer disconnected timeout", "description": "Quorum queues, RabbitMQ 4.3+: milliseconds the messages of a consumer whose connection was lost stay assigned to it.", "type": "integer", "minimum": 0},
	"x-consumer-timeout": {"title": "Consumer timeout", "description": "Milliseconds a delivery may stay unacknowledged before the broker closes the channel.", "type": "integer", "minimum": 0},
	"x-dead-letter-exchange": {"title": "Dead-letter exchange", "description": "Where expired, rejected and over-limit messages go; \"\" is the default exchange.", "type": "string"},
	"x-dead-letter-routing-key": {"title": "Dead-letter routing key", "description": "The routing key of dead-lettered messages; by default they keep their own.", "type": "string"},
	"x-dead-letter-strategy": {"title": "Dead-letter strategy", "description": "Quorum queues only: at-most-once or at-least-once (which needs x-overflow: reject-publish).", "type": "string", "enum": ["at-most-once", "at-least-once"]},
	"x-delayed-retry-max": {"title": "Delayed retry maximum", "description": "RabbitMQ 4.3 quorum queues: the cap of the delayed-retry wait in milliseconds.", "type": "integer", "minimum": 0, "maximum": 315360000000},
	"x-delayed-retry-min": {"title": "Delayed retry minimum", "description": "RabbitMQ 4.3 quorum queues: milliseconds a returned message waits, times its delivery count.", "type": "integer", "minimum": 0, "maximum": 315360000000},
	"x-delayed-retry-type": {"title": "Delayed retry type", "description": "RabbitMQ 4.3 quorum queues: which returns are delayed: disabled, all, returned or failed.", "type": "string", "enum": ["disabled", "all", "returned", "failed"]},
	"x-delivery-limit": {"title": "Delivery limit", "description": "Quorum queues only: returns before the broker dead-letters a message; -1 disables it on RabbitMQ 4.x.", "type": "integer", "minimum": -1},
	"x-expires": {"title": "Queue expiry", "description": "Milliseconds the queue may stay unused before the broker deletes it; at least 1.", "type": "integer", "minimum": 1, "maximum": 315360000000},
	"x-initial-cluster-size": {"title": "Initial cluster size", "description": "Streams: the number of replicas at declaration.", "type": "integer", "minimum": 1},
	"x-max-age": {"title": "Maximum age", "description": "Streams: how long messages are kept, a whole number and a unit Y, M, D, h, m or s, e.g. 7D.", "type": "string", "pattern": "^[0-9]+(Y|M|D|h|m|s)$"},
	"x-max-in-memory-bytes": {"title": "Maximum in-memory bytes", "description": "Quorum queues before 4.0: message bytes kept in memory.", "type": "integer", "minimum": 0},
	"x-max-in-memory-length": {"title": "Maximum in-memory length", "description": "Quorum queues before 4.0: messages kept in memory.", "type": "integer", "minimum": 0},
	"x-max-length": {"title": "Maximum length", "description": "The most messages the queue holds.", "type": "integer", "minimum": 0},
	"x-max-length-bytes": {"title": "Maximum bytes", "description": "The most message body bytes the queue holds.", "type": "integer", "minimum": 0},
	"x-max-priority": {"title": "Maximum priority", "description": "Classic queues: the number of priorities, 0 to 255.", "type": "integer", "minimum": 0, "maximum": 255},
	"x-message-ttl": {"title": "Message TTL", "description": "Milliseconds a message may stay in the queue before it expires (dead-lettered if the queue has a dead-letter exchange).", "type": "integer", "minimum": 0, "maximum": 315360000000},
	"x-overflow": {"title": "Overflow", "description": "What a full queue does: drop-head, reject-publish or reject-publish-dlx.", "type": "string", "enum": ["drop-head", "reject-publish", "reject-publish-dlx"]},
	"x-queue-leader-locator": {"title": "Leader locator", "description": "Where the queue leader is placed: client-local or balanced.", "type": "string", "enum": ["client-local", "balanced", "random", "least-leaders"]},
	"x-queue-master-locator": {"title": "Master locator", "description": "Deprecated: where the queue leader is placed.", "type": "string", "enum": ["client-local", "balanced", "min-masters", "random"]},
	"x-queue-mode": {"title": "Queue mode", "description": "Classic queues before 3.12: default or lazy. RabbitMQ 4.3 refuses it.", "type": "string", "enum": ["default", "lazy"]},
	"x-queue-version": {"title": "Classic queue version", "description": "Classic queues: storage version 1 or 2. RabbitMQ 4.3 refuses 1.", "type": "integer", "minimum": 1, "maximum": 2},
	"x-quorum-initial-group-size": {"title": "Initial group size", "description": "Quorum queues: the number of replicas at declaration.", "type": "integer", "minimum": 1},
	"x-quorum-target-group-size": {"title": "Target group size", "description": "Quorum queues: the number of replicas the broker maintains.", "type": "integer", "minimum": 1},
	"x-single-active-consumer": {"title": "Single active consumer", "description": "Whether only one consumer receives messages at a time.", "type": "boolean"},
	"x-stream-filter-size-bytes": {"title": "Filter size", "description": "Streams: the size of the Bloom filter, 16 to 255 bytes.", "type": "integer", "minimum": 16, "maximum": 255},
	"x-stream-max-segment-size-bytes": {"title": "Segment size", "description": "Streams: the size of a segment file in bytes.", "type": "integer", "minimum": 1}},
"patternProperties": {"^(?:[^x]|x[^-]|x$|$)": {"not": {"type": "null"}}},
"additionalProperties": {"not": {}, "description": "An x- argument RabbitMQ does not know: refused, because the broker would ignore it silently."}`
