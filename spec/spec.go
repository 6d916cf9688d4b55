// Package spec reads, validates and expands rmqtopo's YAML spec.
//
// A spec file describes one vhost: the business exchanges, the work queues
// that bind to them, and each queue's retry policy. Load decodes it strictly
// and reports every problem at once with file:line:column and path; Expand
// turns it, purely, into the desired topology.Topology.
//
// # The spec's keys, described once
//
// Each key a spec file may hold is one entry in the field tables of
// fields_*.go (specObject, queueObject, exchangeObject, …): its key, JSON
// Schema type, bounds, enum and default, title and description (what an
// editor shows), its row in the key tables of docs/spec.md, whether a raw
// queue takes it, how the decoder reads it and, for a queue's plain keys,
// the value `rmqtopo import` writes (QueueValue). The decoder dispatches
// through the tables and takes its key lists, bounds and enums from them;
// JSONSchema and KeyTables generate schemas/rmqtopo.schema.json and the
// docs' tables from them (`go generate ./spec`, or `make generate`), and
// TestGeneratedFiles fails until the checked-in files are regenerated.
//
// Adding a key is one entry plus its expansion. A queue's dlq_name, say,
// is a field of Queue (DLQName string) and this entry in queueObject
// (fields_queue.go), placed where the docs should list it:
//
//	field[Queue]{fieldDoc: fieldDoc{Key: "dlq_name", Title: `DLQ name`, Type: "string", MinLength: 1,
//		Description: `The DLQ's name. Default {queue}.dlq.`,
//		Examples:    `["orders.failed"]`,
//		Row: row{Type: `string`, Default: "`{queue}.dlq`", Meaning: "The DLQ's name."},
//	},
//		decode: nameField(func(q *Queue) *string { return &q.DLQName }),
//		value:  func(q *Queue) any { return q.DLQName }},
//
// with Raw: true if a raw queue takes it, and value only if `rmqtopo
// import` writes it (importer's queueNode then names the key
// where it goes). Then its expansion (expand.go and the checks beside
// it), `go generate ./spec`, and tests of the decoding and the
// expansion. A rule that spans keys (quorum queues only, not with a
// preset) is the decoder's or validation's check, and for editors a
// clause in the object's Schema (the queue's allOf), with a fixture in
// testdata/schema/invalid that spec.Parse and the schema both refuse.
package spec

import (
	"sort"
	"time"

	"github.com/rmqtopo/rmqtopo/rabbitmq"
)

// Version is the only spec version this build understands.
const Version = 1

// Layout is how a queue's delayed retries are laid out in wait queues.
type Layout string

const (
	// LayoutShared gives each vhost one wait queue per distinct delay,
	// shared by every queue that uses that delay. Object count grows with
	// the number of distinct delays, not queues × attempts. The default.
	LayoutShared Layout = "shared"
	// LayoutPerAttempt gives each queue one wait queue per retry, so each
	// retry level can be watched and drained on its own.
	LayoutPerAttempt Layout = "per-attempt"
	// LayoutLevels sends delayed retries through the vhost's ladder of
	// binary delay levels (see contract.Ladder): any delay, chosen per
	// message by the service, through a handful of shared queues.
	LayoutLevels Layout = "levels"
	// LayoutNative lets a quorum queue delay its own retries (RabbitMQ
	// 4.3.1 and later; see contract.Native): no retry exchange and no
	// wait queue.
	LayoutNative Layout = "native"
	// LayoutAuto is native where the judged RabbitMQ release delays
	// retries itself (rabbitmq.Profile.NativeDelayedRetry), else shared, with a return queue for a queue
	// that is not live yet; a live queue keeps the layout it has (see
	// Resolve). It is the default: a queue or spec without a layout has
	// it.
	LayoutAuto Layout = "auto"
)

// Preset makes a queue's retry topology match what services written for an
// existing system expect.
type Preset string

const (
	PresetNone    Preset = ""
	PresetGoQueue Preset = "goqueue"
	PresetOutbox  Preset = "outbox"
	PresetSpring  Preset = "spring"
)

// Queue types a spec may declare.
const (
	TypeClassic = "classic"
	TypeQuorum  = "quorum"
	// TypeStream is allowed for raw queues only: a stream has no
	// dead-lettering, so no retry topology can be built on it.
	TypeStream = "stream"
)

// DefaultDeliveryLimit is the explicit delivery limit of quorum work queues.
// RabbitMQ 4.x applies 20 when none is set and 3.x applies none; rmqtopo
// always writes one so the behaviour is the same on both and visible in
// plans. It is the broker's own (rabbitmq.BrokerDeliveryLimit), so that a
// release that gives it by default needs no argument (release.go).
const DefaultDeliveryLimit = rabbitmq.BrokerDeliveryLimit

// MaxTTL is RabbitMQ's cap on x-message-ttl and per-message expiration
// (10 years, since 3.11).
const MaxTTL = 315_360_000_000 * time.Millisecond

// MaxQuorumGroupSize bounds quorum_initial_group_size; RabbitMQ advises
// 3, 5 or 7 replicas and uses every node when the cluster has fewer.
const MaxQuorumGroupSize = 255

// MaxRetries bounds immediate plus delayed retries of one queue.
const MaxRetries = 100

// File is one loaded spec file.
type File struct {
	Path string
	Spec Spec
}

// Spec is the decoded content of one file.
type Spec struct {
	Version int
	// Name is the spec's identity: its ownership record in the vhost is
	// rmqtopo.owner.<Name>.<generation>. The top-level "name", or, when
	// absent, DefaultName of the file.
	Name          string
	Vhost         string
	Layout        Layout
	WaitQueueType string
	// QuorumInitialGroupSize, when not 0, is the x-quorum-initial-group-size
	// of every quorum queue the file declares or generates: how many
	// cluster nodes hold a replica from the start.
	QuorumInitialGroupSize int
	// Levels configures the vhost's delay ladder; nil for none unless a
	// queue uses the levels layout (then DefaultLevels).
	Levels        *Levels
	RetryPolicies []NamedRetryPolicy
	Exchanges     []Exchange
	Queues        []Queue
	Policies      []Policy

	at pos
}

// NamedRetryPolicy is a reusable policy from retry_policies.
type NamedRetryPolicy struct {
	Name   string
	Policy RetryPolicy
}

// Exchange is a business exchange.
type Exchange struct {
	Name       string
	Type       string
	Durable    bool
	AutoDelete bool
	Internal   bool
	Arguments  map[string]any
	// Bindings are exchange-to-exchange bindings into this exchange.
	Bindings []Binding

	at, nameAt pos
}

// Binding binds a queue or exchange to a source exchange.
type Binding struct {
	Exchange   string
	RoutingKey string
	Arguments  map[string]any

	at pos
}

// Queue is a work queue and its failure handling.
type Queue struct {
	Name     string
	Type     string
	Bindings []Binding
	// Retry is the resolved policy; RetryRef names it when it came from
	// retry_policies.
	Retry            RetryPolicy
	RetryRef         string
	ImmediateRetries int
	Layout           Layout
	DLQ              bool
	// DLQName names the DLQ when it is not contract.DeadLetterQueue(Name):
	// a DLQ made by hand under another name (invoice.create.failed), kept
	// by name when the queue is adopted. "" for the default; see DLQOf.
	DLQName    string
	ParkingLot bool
	// ReturnQueue creates contract.ReturnQueue(Name), where delayed
	// retries come back ahead of the work queue's backlog (returnq.go).
	ReturnQueue   bool
	MessageTTL    time.Duration
	MaxLength     int64
	DeliveryLimit int
	Preset        Preset
	// Raw declares the queue exactly as written, with no retry topology:
	// only Type, Durable, AutoDelete, Arguments and Bindings apply (see
	// raw.go). Durable and AutoDelete are read for raw queues only; every
	// other queue is durable.
	Raw        bool
	Durable    bool
	AutoDelete bool
	// Arguments are extra x-arguments of the queue; on a queue that is not
	// raw they may not set what rmqtopo sets itself.
	Arguments map[string]any
	// Retire names hand-made queues this queue's retry topology takes the
	// place of (a TTL retry queue that dead-letters back into it): the
	// spec adopts them only to retire them. Apply records them as the
	// spec's own, the plan names them while they hold messages (they go
	// on dead-lettering back at their time), and --prune deletes each
	// once it is empty; see Retired.
	Retire []string
	// Migrate turns a replace of the queue (and of the queues generated
	// for it) into a message-preserving migration; see plan.Migration.
	Migrate bool
	// PresetOptions are the names and arguments the preset's library lets
	// its user choose; unset ones take the library's defaults.
	PresetOptions PresetOptions

	at, nameAt, deliveryLimitAt, retryAt, layoutAt, argumentsAt, presetOptionsAt, dlqNameAt pos
	// retireAt records where each name of Retire is written.
	retireAt []pos
	// set records the keys written, for the checks of raw queues.
	set keySet
	// res is the layout and return queue Resolve chose for the broker;
	// unset, auto expands as shared without a return queue.
	res resolution
	// argAt records where each argument is written.
	argAt map[string]pos
}

// keySet records where each key of a mapping is written, in the order
// written: a queue has a few keys, and a spec 100,000s of queues, too many
// for a map each.
type keySet []keyAt

type keyAt struct {
	key string
	at  pos
}

// get returns where key is written.
func (s keySet) get(key string) (pos, bool) {
	for _, k := range s {
		if k.key == key {
			return k.at, true
		}
	}
	return pos{}, false
}

// sorted returns the keys in s, sorted.
func (s keySet) sorted() []string {
	keys := make([]string, len(s))
	for i, k := range s {
		keys[i] = k.key
	}
	sort.Strings(keys)
	return keys
}

// PresetOptions are a preset's choices of names and arguments, as its
// library lets its user make them. Empty strings mean the library's default
// (see the Default* constants).
type PresetOptions struct {
	// spring: the WAIT_EXCHANGE, RETURN_EXCHANGE and WAIT_QUEUE_PREFIX
	// constants, shared by every spring queue of a vhost, and the work
	// queue's DL_EXCHANGE.
	WaitExchange       string
	ReturnExchange     string
	WaitQueuePrefix    string
	DeadLetterExchange string
	// goqueue: the work queue's QueueDeclareConfig.Args.
	QueueArguments map[string]any

	queueArgumentsAt pos
}

// RetryPolicy is a schedule of delayed retries.
type RetryPolicy struct {
	// Kind is "delays", "fixed", "linear", "exponential", or "" for none.
	Kind     string
	Explicit []time.Duration // kind delays
	Delay    time.Duration   // kind fixed
	Step     time.Duration   // kind linear
	Initial  time.Duration   // kind exponential
	Factor   float64         // kind exponential
	Max      time.Duration   // kind exponential; 0 means uncapped
	Attempts int             // kinds fixed, linear, exponential
	// Jitter is JitterNone or JitterFull (each delay uniformly random
	// between 0 and the computed delay); jitter needs the levels layout.
	Jitter string
}

// Jitter kinds of a retry policy.
const (
	JitterNone = "none"
	JitterFull = "full"
)

// Policy is a raw RabbitMQ user policy.
type Policy struct {
	Name       string
	Pattern    string
	ApplyTo    string
	Priority   int64
	Definition map[string]any

	at, patternAt pos
}
