package spec

import (
	"math"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rmqtopo/rmqtopo/contract"
)

// queueObject is a work queue; Raw marks the keys a raw queue takes.
var queueObject = newObject(objectDoc{Name: "queue", Title: `Work queue`,
	Description: `A work queue and its failure handling. A failed delivery is retried immediately immediate_retries times, then after each delay of retry, then goes to the DLQ.`,
	// The rules that span keys. A raw queue's rule is generated: it
	// refuses the keys without Raw (see rawQueueRule).
	AllOf: `{"if": {"required": ["delivery_limit"]}, "then": {"required": ["type"], "properties": {"type": {"const": "quorum"}}}},
		{"if": {"required": ["layout"], "properties": {"layout": {"const": "native"}}}, "then": {"required": ["type"], "properties": {"type": {"const": "quorum"}}, "not": {"required": ["delivery_limit"]}}},
		{"if": {"required": ["preset"]}, "then": {"not": {"required": ["layout"]}, "properties": {"immediate_retries": {"const": 0}}}}`,
	RawRule: true},
	field[Queue]{fieldDoc: fieldDoc{Key: keyName, Raw: true, Title: `Queue name`, Type: "string", MinLength: 1, Required: true,
		Description: `At most 255 bytes (for a quorum queue, vhost + 1 + name); the prefix amq. is reserved. Generated objects are named after it: {name}.retry, {name}.dlx, {name}.dlq, {name}.parking-lot, {name}.wait.{n}.{delay}.`,
		Examples:    `["orders.created"]`,
		Row: row{Type: `string`, Default: `required`,
			Meaning: "At most 255 bytes, and for a quorum queue the vhost name + 1 + the queue name at most 255 bytes; must not start with `amq.`. Generated objects are named after it. Each queue is declared once."},
	},
		decode: func(d *decoder, _ *fieldDoc, q *Queue, v *yaml.Node, p string) {
			q.nameAt = at(v, p)
			d.name(v, p, &q.Name)
		}},
	field[Queue]{fieldDoc: fieldDoc{Key: keyType, Raw: true, Title: `Queue type`, Type: "string", Default: "classic",
		Description: `classic (default) or quorum. Its DLQ and parking lot, and its per-attempt wait queues, get the same type. A raw queue may also be a stream.`,
		Examples:    `["classic", "quorum"]`,
		Row: row{Type: "`classic` or `quorum` (or `stream`, raw queues only)", Default: "`classic`",
			Meaning: `The work queue's type. Its DLQ, parking lot and per-attempt wait queues get the same type.`},
	},
		decode: decodeQueueType,
		value:  func(q *Queue) any { return q.Type }},
	field[Queue]{fieldDoc: fieldDoc{Key: "bindings", Raw: true, Title: `Bindings`, Type: "array",
		Description: `The exchanges and routing keys that feed this queue.`,
		Examples:    `[[{"exchange": "amq.topic", "routing_key": "order.created"}]]`,
		Schema:      `"items": {"$ref": "#/$defs/binding"}`,
		Row: row{Type: `list of [bindings](#bindings)`, Default: `none`,
			Meaning: `What feeds the queue.`},
	},
		decode: bindingsField(func(q *Queue) *[]Binding { return &q.Bindings })},
	field[Queue]{fieldDoc: fieldDoc{Key: "retry", Title: `Retry policy`,
		Description: `Delayed retries: the name of a policy under retry_policies, or an inline policy with exactly one of delays, fixed, linear or exponential. Without it, no delayed retries.`,
		Examples:    `["standard", {"delays": ["30s", "2m", "10m"]}, {"exponential": {"initial": "1s", "factor": 2, "attempts": 5}}, {"fixed": {"delay": "5s", "attempts": 3}}, {"linear": {"step": "1m", "attempts": 3}}]`,
		Schema:      `"oneOf": [{"title": "Named retry policy", "description": "The name of a policy under retry_policies.", "type": "string", "minLength": 1}, {"$ref": "#/$defs/retryPolicy"}]`,
		Row: row{Type: `name or [retry policy](#retry-policies)`, Default: `none (no delayed retries)`,
			Meaning: "The delayed retries: the name of a policy under `retry_policies`, or an inline policy."},
	},
		decode: decodeQueueRetry},
	field[Queue]{fieldDoc: fieldDoc{Key: "immediate_retries", Title: `Immediate retries`, Type: "integer", Min: bound(0), Max: bound(MaxRetries), Default: 0,
		Description: `Retries straight back to the queue, before any delayed retry. 0 to 100, default 0; immediate plus delayed retries may not exceed 100. Not allowed with a preset.`,
		Examples:    `[3]`,
		Row: row{Type: `integer 0–100`, Default: "`0`",
			Meaning: `Retries straight back to the queue, before any delayed retry. Immediate plus delayed retries may not exceed 100.`},
	},
		decode: intField(func(q *Queue) *int { return &q.ImmediateRetries }),
		value:  func(q *Queue) any { return q.ImmediateRetries }},
	field[Queue]{fieldDoc: fieldDoc{Key: "layout", Ref: "layout", Title: `Wait-queue layout`,
		Description: `Overrides the vhost's layout for this queue. auto: native on RabbitMQ 4.3.1+, else shared; a live queue keeps its layout. native: the quorum queue delays its own retries, no retry exchange or wait queues. shared: rmqtopo.wait.{delay} queues shared by the vhost. per-attempt: one {queue}.wait.{n}.{delay} queue per retry, each observable on its own. levels: through the vhost's delay ladder, each delay chosen by the service. Not allowed with a preset.`,
		Row: row{Type: "`auto`, `native`, `shared`, `per-attempt` or `levels`", Default: "the top-level `layout`",
			Meaning: `This queue's layout.`},
	},
		decode: func(d *decoder, _ *fieldDoc, q *Queue, v *yaml.Node, p string) {
			q.layoutAt = at(v, p)
			q.Layout = d.layout(v, p)
		},
		value: func(q *Queue) any { return string(q.Layout) }},
	field[Queue]{fieldDoc: fieldDoc{Key: "dlq", Title: `Dead-letter queue`, Type: "boolean", Default: true,
		Description: `Whether failures past the last retry, rejections, expiry and delivery-limit overflow go to {queue}.dlq (via the fanout {queue}.dlx). Default true; false discards them.`,
		Row: row{Type: `boolean`, Default: "`true`",
			Meaning: "Whether failures end in `{queue}.dlq`. With `false` there is no DLQ: a message past its last retry is discarded, and so are messages the broker dead-letters (rejected, expired, over the delivery limit)."},
	},
		decode: boolField(func(q *Queue) *bool { return &q.DLQ }),
		value:  func(q *Queue) any { return q.DLQ }},
	field[Queue]{fieldDoc: fieldDoc{Key: "dlq_name", Title: `DLQ name`, Type: "string", MinLength: 1,
		Description: `The DLQ's name, when it is not {queue}.dlq: a DLQ made by hand under another name (invoice.create.failed), kept by name when the queue is adopted (rmqtopo import writes it). It is still fed by the fanout {queue}.dlx. Needs dlq; not with a preset or on a raw queue; it may not collide with any other queue of the spec or generated by it.`,
		Examples:    `["invoice.create.failed"]`,
		Row: row{Type: `queue name`, Default: "`{queue}.dlq`",
			Meaning: "The DLQ's name, for a DLQ made by hand under another name (`invoice.create.failed`), which `rmqtopo import` keeps by name ([adopting a hand-made retry scheme](import.md#hand-made-retry-schemes)). Only the name changes: `{queue}.dlx` still feeds it and `{queue}` still dead-letters there; `rmqtopo dlq replay` of it needs `--to {queue}`. Needs `dlq`; not with a preset (its library names the DLQ) nor on a raw queue. Checked like every generated name: a valid queue name (255 bytes, no `amq.`), colliding with no other queue of the spec or generated by it (the error is at `dlq_name`)."},
	},
		decode: func(d *decoder, _ *fieldDoc, q *Queue, v *yaml.Node, p string) {
			q.dlqNameAt = at(v, p)
			d.name(v, p, &q.DLQName)
		},
		value: func(q *Queue) any { return q.DLQName }},
	field[Queue]{fieldDoc: fieldDoc{Key: "parking_lot", Title: `Parking lot`, Type: "boolean", Default: false,
		Description: `Whether to create {queue}.parking-lot, where operators move hopeless DLQ messages. Nothing routes to it automatically. Default false.`,
		Row: row{Type: `boolean`, Default: "`false`",
			Meaning: "Creates `{queue}.parking-lot`, where operators move hopeless DLQ messages. Nothing routes to it by itself."},
	},
		decode: boolField(func(q *Queue) *bool { return &q.ParkingLot }),
		value:  func(q *Queue) any { return q.ParkingLot }},
	field[Queue]{fieldDoc: fieldDoc{Key: keyReturnQueue, Title: `Return queue`, Type: "boolean",
		Description: `Whether delayed retries come back into {queue}.return instead of the back of the work queue, so that a consumer serving it first (retry.Consume does) sees them on time behind a backlog. A retry no consumer takes from it within 5s moves on to the back of the work queue. Not with a preset, nor with layout native (the broker returns retries ahead of the backlog itself). Default: true for a queue not live yet, except a quorum queue on RabbitMQ 4.0+ (whose retries come back ahead of the backlog by message priority 9, to every consumer) and the native layout, else what the live queue has.`,
		Examples:    `[true, false]`,
		Row: row{Type: `boolean`, Default: "`true` for a queue not live yet, except a quorum queue on RabbitMQ 4.0+ (whose retries come back ahead of the backlog by message priority, to every consumer) and `native`; a live queue keeps what it has",
			Meaning: "Creates `{queue}.return`, where delayed retries come back instead of the back of the queue, so that a consumer serving it first (`retry.Consume` does) gets them on time behind a backlog. A retry nobody takes from it within 5 s moves on to the back of the queue. Not with a preset. See [return queue](runtime-helper.md#retries-behind-a-backlog-the-return-queue)."},
	},
		decode: boolField(func(q *Queue) *bool { return &q.ReturnQueue }),
		value:  func(q *Queue) any { return q.ReturnQueue }},
	field[Queue]{fieldDoc: fieldDoc{Key: "message_ttl", Ref: "duration", Title: `Message TTL`,
		Description: `How long a message may sit in the work queue unconsumed before it expires into the DLQ (x-message-ttl). Default: no TTL.`,
		Examples:    `["5m"]`,
		Row: row{Type: `duration`, Default: `none`,
			Meaning: "How long a message may wait in the work queue unconsumed before it expires into the DLQ (policy key `message-ttl`: changes in place)."},
	},
		decode: durationField(func(q *Queue) *time.Duration { return &q.MessageTTL }),
		value:  func(q *Queue) any { return contract.FormatDelay(q.MessageTTL) }},
	field[Queue]{fieldDoc: fieldDoc{Key: "max_length", Title: `Maximum length`, Type: "integer", Min: bound(1), Max: bound(math.MaxInt64),
		Description: `The most messages the queue holds (x-max-length); at least 1. Default: unbounded.`,
		Examples:    `[100000]`,
		Row: row{Type: `integer ≥ 1`, Default: `unbounded`,
			Meaning: "The most messages the queue holds (policy key `max-length`: changes in place). A quorum queue with `x-overflow: reject-publish` (rmqtopo's, with a DLQ) takes one more before it refuses publishes: 4 at a limit of 3 on 4.3.6 and 3.10.8, each confirmed (`TestEffectiveValues`)."},
	},
		decode: int64Field(func(q *Queue) *int64 { return &q.MaxLength }),
		value:  func(q *Queue) any { return q.MaxLength }},
	field[Queue]{fieldDoc: fieldDoc{Key: "delivery_limit", Title: `Delivery limit`, Type: "integer", Min: bound(1), Max: bound(math.MaxInt32),
		Description: `Quorum queues only (x-delivery-limit): how many times a message may be returned to the queue before the broker dead-letters it, 1 to 2147483647. Default 20 for quorum queues, written explicitly so RabbitMQ 3.x and 4.x behave alike.`,
		Examples:    `[10]`,
		Row: row{Type: `integer 1–2147483647`, Default: "`20` on quorum queues",
			Meaning: "How many times a message may be returned to the queue before the broker dead-letters it (policy key `delivery-limit`: changes in place. On RabbitMQ 3.x a queue first declared without `delivery_limit` carries the default as argument `x-delivery-limit: 20`, and the lower of argument and policy wins, so raising it above 20 replaces the queue, shown with the messages at stake (set it when the queue is first declared if it may rise); on 4.0+ the default is the broker's and the queue has no such argument, so raising it is in place too; see [plan and apply](plan-apply.md#changing-attributes-in-place) and [versions](versions.md)). Quorum queues only: classic queues do not support it. rmqtopo sets it on quorum queues on every release (on 4.0+ as the broker's default), so that RabbitMQ 3.x (no default) and 4.x (default 20) behave alike."},
	},
		decode: func(d *decoder, f *fieldDoc, q *Queue, v *yaml.Node, p string) {
			q.deliveryLimitAt = at(v, p)
			d.intField(v, p, *f.Min, *f.Max, &q.DeliveryLimit)
		},
		value: func(q *Queue) any { return q.DeliveryLimit }},
	field[Queue]{fieldDoc: fieldDoc{Key: "retire", Title: `Retired queues`, Type: "array", Schema: `"items": {"type": "string", "minLength": 1}`,
		Description: `Hand-made queues this queue's retry topology takes the place of (a TTL retry queue that dead-letters back into it), which rmqtopo import lists when it adopts them. The spec takes them over only to retire them: apply records them as the spec's own; the plan keeps each while it holds messages (they keep dead-lettering back at their time) and names it (RT014); with --prune it deletes each once it is empty. Not on a raw queue; a name may not be one the spec declares or generates.`,
		Examples:    `[["invoice.create.retry"]]`,
		Row: row{Type: `list of queue names`, Default: `none`,
			Meaning: "Hand-made queues this queue's retry topology takes the place of (a TTL retry queue that dead-letters back into it), which [`rmqtopo import`](import.md#hand-made-retry-schemes) lists when it adopts a hand-made retry scheme. The spec takes them over only to retire them: apply records them as the spec's own; the plan keeps each while it may hold messages (they go on dead-lettering back at their time) and names it (`info[RT014]`: `retired: ... delete with --prune once empty`); `apply --prune` deletes each once it is empty, guarded by the broker whatever `--allow-destroy` says. A name may not be one the spec declares or generates, nor be retired twice."},
	},
		decode: func(d *decoder, _ *fieldDoc, q *Queue, v *yaml.Node, p string) {
			d.list(v, p, func(_ int, n *yaml.Node, np string) {
				var name string
				d.name(n, np, &name)
				q.Retire, q.retireAt = append(q.Retire, name), append(q.retireAt, at(n, np))
			})
		},
		value: func(q *Queue) any { return q.Retire }},
	field[Queue]{fieldDoc: fieldDoc{Key: "migrate", Title: `Migrate instead of replace`, Type: "boolean", Default: false,
		Description: `When a change this queue's properties cannot take in place (type, durability, a pinned argument) needs a replace, migrate it instead: move its messages to {queue}.rmqtopo-migrate with confirms, re-create it, restore its bindings and move them back. Applies to its DLQ, parking lot and per-attempt wait queues too. Default false; plan --migrate does it for every queue.`,
		Row: row{Type: `boolean`, Default: "`false`",
			Meaning: "When a change cannot be made in place (type, durability, an argument pinned by a library) and would replace the queue, migrate it instead: its messages are moved to `{queue}.rmqtopo-migrate` with confirms and back around the re-creation, and its bindings are handed over and back. Covers its DLQ, parking lot and per-attempt wait queues too. `plan --migrate` does it for every queue. See [migration](plan-apply.md#migration)."},
	},
		decode: boolField(func(q *Queue) *bool { return &q.Migrate }),
		value:  func(q *Queue) any { return q.Migrate }},
	field[Queue]{fieldDoc: fieldDoc{Key: "preset", Title: `Preset`, Type: "string", Enum: []string{"goqueue", "outbox", "spring"},
		Description: `Reproduce the retry topology an existing library declares for itself instead of rmqtopo's own: goqueue (bxcodec/goqueue), outbox, or spring. A preset fixes the wait queues, so layout and immediate_retries do not apply.`,
		Row: row{Type: "`goqueue`, `outbox` or `spring`", Default: `none`,
			Meaning: "Generate the retry topology an existing library declares for itself instead of rmqtopo's own. See [Presets](#presets). `layout` and `immediate_retries` do not apply to a queue with a preset."},
	},
		decode: decodePreset,
		value:  func(q *Queue) any { return string(q.Preset) }},
	field[Queue]{fieldDoc: fieldDoc{Key: keyPresetOptions, Title: `Preset options`,
		Description: `The names and arguments the preset's library lets its user choose; unset ones take the library's defaults. spring: wait_exchange, return_exchange, wait_queue_prefix (shared by every spring queue of the vhost) and dead_letter_exchange (the work queue's DL_EXCHANGE). goqueue: queue_arguments (the work queue's QueueDeclareConfig.Args).`,
		Examples:    `[{}]`,
		Schema:      `"anyOf": [{"$ref": "#/$defs/springOptions"}, {"$ref": "#/$defs/goqueueOptions"}]`,
		Row: row{Type: `mapping`, Default: `none`,
			Meaning: "The names and arguments the preset's library lets its user choose. spring: `wait_exchange`, `return_exchange`, `wait_queue_prefix` (the same for every spring queue of the vhost), `dead_letter_exchange`; goqueue: `queue_arguments`. See [presets](presets.md)."},
	},
		decode:// Decoded once the preset is known (see queue): its keys depend on it.
		func(_ *decoder, _ *fieldDoc, q *Queue, v *yaml.Node, p string) { q.presetOptionsAt = at(v, p) }},
	field[Queue]{fieldDoc: fieldDoc{Key: "arguments", Raw: true, Ref: "queueArguments", Title: `Queue arguments`,
		Description: `Extra x-arguments, checked by name and value type. On a queue that is not raw they may not set what rmqtopo sets itself (x-queue-type, x-delivery-limit, x-message-ttl, x-max-length, and the dead-lettering of a queue with a DLQ).`,
		Examples:    `[{"x-max-length-bytes": 1048576}, {"x-single-active-consumer": true}]`,
		Row: row{Type: `mapping`, Default: `none`,
			Meaning: "Extra queue arguments, checked strictly: an `x-` name RabbitMQ does not know (`x-max-lenght`) and a value of the wrong type (`x-message-ttl: \"60000\"`) are errors, because the broker ignores the first silently and refuses the second only in the middle of an apply; an argument of another queue type (`x-delivery-limit` and `x-dead-letter-strategy` need a quorum queue, `x-initial-cluster-size` a stream) or without the argument it needs (`x-dead-letter-routing-key` without `x-dead-letter-exchange`) is refused: the [key table](versions.md#the-key-table) says which. Names without `x-` pass as written. On a queue that is not raw they may not set what rmqtopo sets itself: `x-queue-type` (use `type`), `x-delivery-limit`, `x-message-ttl`, `x-max-length` (use the keys above) and, with a DLQ, the dead-lettering arguments."},
	},
		decode: func(d *decoder, _ *fieldDoc, q *Queue, v *yaml.Node, p string) {
			q.argumentsAt = at(v, p)
			d.args(v, p, &q.Arguments)
			q.argAt = keyPositions(v, p)
		}},
	field[Queue]{fieldDoc: fieldDoc{Key: "raw", Raw: true, Title: `Raw queue`, Type: "boolean", Default: false,
		Description: `Declare the queue exactly as written (type, durable, auto_delete, arguments, bindings) with no retry topology: no retry exchange, wait queues, DLX or DLQ. rmqtopo import writes the queues it does not recognise as part of a retry topology this way. Default false.`,
		Row: row{Type: `boolean`, Default: "`false`",
			Meaning: `Declare the queue exactly as written, with no retry topology: see [Raw queues](#raw-queues).`},
	},
		decode: boolField(func(q *Queue) *bool { return &q.Raw })},
	field[Queue]{fieldDoc: fieldDoc{Key: keyDurable, Raw: true, Title: `Durable`, Type: "boolean", Default: true,
		Description: `Whether the queue survives a broker restart. Default true; only a raw queue may be false.`,
		Row: row{Type: `boolean`, Default: "`true`",
			Meaning: "Raw queues only may set `false`: every queue with retry topology is durable."},
	},
		decode: boolField(func(q *Queue) *bool { return &q.Durable })},
	field[Queue]{fieldDoc: fieldDoc{Key: keyAutoDelete, Raw: true, Title: `Auto-delete`, Type: "boolean", Default: false,
		Description: `Whether the broker deletes the queue when its last consumer goes. Default false; only a raw queue may be true.`,
		Row: row{Type: `boolean`, Default: "`false`",
			Meaning: "Raw queues only may set `true`."},
	},
		decode: boolField(func(q *Queue) *bool { return &q.AutoDelete })},
)

// springOptionsObject is preset_options of a spring queue.
var springOptionsObject = newObject(objectDoc{Name: "springOptions", Title: `Spring preset options`,
	Description: `Names the Spring design lets the service choose.`},
	field[PresetOptions]{fieldDoc: fieldDoc{Key: "wait_exchange", Title: `Wait exchange`, Type: "string", MinLength: 1,
		Description: `WAIT_EXCHANGE, the headers exchange retries are published to. Default wait. The same for every spring queue of the vhost.`,
		Examples:    `["wait"]`,
	},
		decode: nameField(func(o *PresetOptions) *string { return &o.WaitExchange }),
		value:  func(o *PresetOptions) any { return o.WaitExchange }},
	field[PresetOptions]{fieldDoc: fieldDoc{Key: "return_exchange", Title: `Return exchange`, Type: "string", MinLength: 1,
		Description: `RETURN_EXCHANGE, the headers exchange wait queues dead-letter into. Default return. The same for every spring queue of the vhost.`,
		Examples:    `["return"]`,
	},
		decode: nameField(func(o *PresetOptions) *string { return &o.ReturnExchange }),
		value:  func(o *PresetOptions) any { return o.ReturnExchange }},
	field[PresetOptions]{fieldDoc: fieldDoc{Key: "wait_queue_prefix", Title: `Wait queue prefix`, Type: "string", MinLength: 1,
		Description: `WAIT_QUEUE_PREFIX; a wait queue is named the prefix and its delay in milliseconds. Default wait-queue-. The same for every spring queue of the vhost.`,
		Examples:    `["wait-queue-"]`,
	},
		decode: nameField(func(o *PresetOptions) *string { return &o.WaitQueuePrefix }),
		value:  func(o *PresetOptions) any { return o.WaitQueuePrefix }},
	field[PresetOptions]{fieldDoc: fieldDoc{Key: "dead_letter_exchange", Title: `Dead-letter exchange`, Type: "string", MinLength: 1,
		Description: `DL_EXCHANGE, the work queue's x-dead-letter-exchange, which rmqtopo declares as a fanout into the queue's DLQ. Default {queue}.dlx; one per queue.`,
		Examples:    `["orders.dlx"]`,
	},
		decode: nameField(func(o *PresetOptions) *string { return &o.DeadLetterExchange }),
		value:  func(o *PresetOptions) any { return o.DeadLetterExchange }},
)

// goqueueOptionsObject is preset_options of a goqueue queue.
var goqueueOptionsObject = newObject(objectDoc{Name: "goqueueOptions", Title: `GoQueue preset options`,
	Description: `What GoQueue lets the service choose.`},
	field[PresetOptions]{fieldDoc: fieldDoc{Key: "queue_arguments", Title: `Queue arguments`, Type: "object",
		Description: `The work queue's QueueDeclareConfig.Args, declared as written (x-queue-type comes from the queue's type). Default none.`,
		Examples:    `[{"x-max-priority": 10}]`,
	},
		decode: func(d *decoder, _ *fieldDoc, o *PresetOptions, v *yaml.Node, p string) {
			o.queueArgumentsAt = at(v, p)
			d.args(v, p, &o.QueueArguments)
		}},
)

// QueueValue is the value a spec file writes for q's key, and whether it
// writes one: not when q holds what a queue without the key has. It
// answers for the keys of a queue with a plain value (type, preset,
// immediate_retries, layout, dlq, parking_lot, return_queue, message_ttl,
// max_length, delivery_limit); `rmqtopo import` writes the others itself.
func QueueValue(q Queue, key string) (any, bool) {
	zero := newQueue()
	return queueObject.written(&q, &zero, key)
}

// PresetOptionValue is QueueValue for a key of spring's preset_options.
func PresetOptionValue(o PresetOptions, key string) (any, bool) {
	return springOptionsObject.written(&o, &PresetOptions{}, key)
}
