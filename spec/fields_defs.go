package spec

// Keys read by name outside the decoder: the checks of raw queues, of
// the native layout and of the return queue look a queue's keys up by
// them.
const (
	keyName          = "name"
	keyType          = "type"
	keyDurable       = "durable"
	keyAutoDelete    = "auto_delete"
	keyReturnQueue   = "return_queue"
	keyPresetOptions = "preset_options"
)

// layouts are the values of layout, in the order the docs give them.
var layouts = []string{string(LayoutAuto), string(LayoutNative), string(LayoutShared), string(LayoutPerAttempt), string(LayoutLevels)}

// queueTypes are the values of type and wait_queue_type (a raw queue
// may also be a stream).
var queueTypes = []string{TypeClassic, TypeQuorum}

// attemptsDoc describes the attempts of a fixed, linear or exponential
// policy: the schema's $defs/attempts.
var attemptsDoc = fieldDoc{Key: "attempts", Title: "Attempts", Type: "integer", Min: bound(0), Max: bound(MaxRetries),
	Description: "How many delayed retries the schedule makes, 0 to 100. Immediate plus delayed retries of one queue may not exceed 100.",
	Examples:    `[3, 5]`,
}

// durationDoc describes a duration: the schema's $defs/duration. The
// pattern is time.ParseDuration's syntax; the decoder checks the rest.
var durationDoc = fieldDoc{Key: "duration", Title: "Duration", Type: "string",
	Description: `A Go duration with a unit and millisecond resolution, e.g. "1500ms", "2s", "5m", "1h30m". Must be positive and at most 10 years (RabbitMQ's TTL cap). A bare number has no unit and is refused.`,
	Pattern:     `^(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`,
	Schema:      `"not": {"pattern": "^([0.]+(ns|us|µs|μs|ms|s|m|h))+$"}`,
	Examples:    `["500ms", "2s", "5m", "1h"]`,
}
