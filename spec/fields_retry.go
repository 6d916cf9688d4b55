package spec

import (
	"time"

	"go.yaml.in/yaml/v3"
)

// retryPolicyObject is a retry policy: one key, its kind.
var retryPolicyObject = newObject(objectDoc{Name: "retryPolicy", Title: `Retry policy`,
	Description: `A schedule of delayed retries: exactly one of delays, fixed, linear or exponential. "delays: []" means no delayed retries.`,
	Schema:      `"minProperties": 1, "maxProperties": 1`},
	field[retryDecoding]{fieldDoc: fieldDoc{Key: "delays", Title: `Explicit delays`, Type: "array",
		Description: `The delay before each delayed retry, in order; at most 100. [] means no delayed retries.`,
		Examples:    `[["2s", "5s", "15s"], []]`,
		Schema:      `"maxItems": 100, "items": {"$ref": "#/$defs/duration"}`,
	},
		decode: func(d *decoder, _ *fieldDoc, x *retryDecoding, v *yaml.Node, p string) {
			x.kind("delays")
			x.r.Explicit = d.delayList(v, p)
		}},
	field[retryDecoding]{fieldDoc: fieldDoc{Key: "fixed", Title: `Fixed delay`, Type: "object",
		Description: `The same delay before every retry: attempts × delay.`,
		Examples:    `[{"delay": "10s", "attempts": 3}]`,
		Inline:      fixedObject,
	},
		decode: func(d *decoder, _ *fieldDoc, x *retryDecoding, v *yaml.Node, p string) {
			x.kind("fixed")
			fixedObject.decodeRequired(d, v, p, x)
		}},
	field[retryDecoding]{fieldDoc: fieldDoc{Key: "linear", Title: `Linear backoff`, Type: "object",
		Description: `Retry n waits n × step: step, 2×step, 3×step, …`,
		Examples:    `[{"step": "1m", "attempts": 3}]`,
		Inline:      linearObject,
	},
		decode: func(d *decoder, _ *fieldDoc, x *retryDecoding, v *yaml.Node, p string) { d.linear(x, v, p) }},
	field[retryDecoding]{fieldDoc: fieldDoc{Key: "exponential", Title: `Exponential backoff`, Type: "object",
		Description: `Retry n waits initial × factor^(n-1), rounded to the millisecond and capped at max. E.g. initial 1s, factor 10, max 500s, 5 attempts: 1s, 10s, 100s, 500s, 500s.`,
		Examples:    `[{"initial": "1s", "factor": 10, "max": "500s", "attempts": 5}]`,
		Inline:      exponentialObject,
	},
		decode: func(d *decoder, _ *fieldDoc, x *retryDecoding, v *yaml.Node, p string) {
			x.kind("exponential")
			d.exponential(v, p, x)
		}},
)

// fixedObject is a fixed policy.
var fixedObject = newObject(objectDoc{Name: "fixed"},
	field[retryDecoding]{fieldDoc: fieldDoc{Key: "delay", Ref: "duration", Title: `Delay`, Required: true,
		Description: `The wait before each retry.`,
		Examples:    `["10s"]`,
	},
		decode: durationField(func(x *retryDecoding) *time.Duration { return &x.r.Delay })},
	attemptsKey,
	jitterKey,
)

// linearObject is a linear policy.
var linearObject = newObject(objectDoc{Name: "linear"},
	field[retryDecoding]{fieldDoc: fieldDoc{Key: "step", Ref: "duration", Title: `Step`, Required: true,
		Description: `The first delay and the increment of each following one. The last delay (attempts × step) must stay within 10 years.`,
		Examples:    `["1m"]`,
	},
		decode: durationField(func(x *retryDecoding) *time.Duration { return &x.r.Step })},
	attemptsKey,
	jitterKey,
)

// exponentialObject is an exponential policy.
var exponentialObject = newObject(objectDoc{Name: "exponential",
	// A cap makes a factor of 1 pointless: the decoder refuses it too.
	Schema: `"if": {"required": ["max"]}, "then": {"properties": {"factor": {"exclusiveMinimum": 1}}}`},
	field[retryDecoding]{fieldDoc: fieldDoc{Key: "initial", Ref: "duration", Title: `Initial delay`, Required: true,
		Description: `The delay before the first delayed retry. Not larger than max.`,
		Examples:    `["1s"]`,
	},
		decode: durationField(func(x *retryDecoding) *time.Duration { return &x.r.Initial })},
	field[retryDecoding]{fieldDoc: fieldDoc{Key: "factor", Title: `Factor`, Type: "number", Min: bound(1), Required: true,
		Description: `What each delay is multiplied by for the next. At least 1 (delays never shrink); greater than 1 when max is set.`,
		Examples:    `[2, 10, 1.5]`,
	},
		decode: decodeFactor},
	field[retryDecoding]{fieldDoc: fieldDoc{Key: "max", Ref: "duration", Title: `Maximum delay`,
		Description: `Caps every delay. Optional; without it the cap is RabbitMQ's 10-year TTL limit.`,
		Examples:    `["5m"]`,
	},
		decode: func(d *decoder, _ *fieldDoc, x *retryDecoding, v *yaml.Node, p string) {
			x.hasMax = true
			d.duration(v, p, &x.r.Max)
		}},
	attemptsKey,
	jitterKey,
)

// attemptsKey and jitterKey are keys of fixed, linear and exponential
// alike.
var (
	attemptsKey = field[retryDecoding]{fieldDoc: fieldDoc{Key: "attempts", Ref: "attempts", Title: `Attempts`, Required: true,
		Description: `How many delayed retries, 0 to 100.`,
	},
		decode: decodeAttempts}
	jitterKey = field[retryDecoding]{fieldDoc: fieldDoc{Key: "jitter", Title: `Jitter`, Type: "string", Enum: []string{"none", "full"}, Default: "none",
		Description: `full: each delay is drawn uniformly between 0 and the computed delay ("full jitter"), so retries of many messages failing together spread out. Needs layout levels, where the service picks each delay; none (default): the computed delay.`,
	},
		decode: decodeJitter}
)
