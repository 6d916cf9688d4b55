package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rmqtopo/rmqtopo/internal/english"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Severity is how much a diagnostic matters to whoever applies the plan.
type Severity string

const (
	// SeverityError blocks apply unless the user accepts the consequence.
	SeverityError Severity = "error"
	// SeverityWarning is worth reading before applying.
	SeverityWarning Severity = "warning"
	// SeverityInfo reports a state, such as a wait queue still draining.
	SeverityInfo Severity = "info"
)

// Diagnostic codes; the table in the package doc explains each.
const (
	CodeReplaceQueueWithMessages = "RT001"
	CodeDeleteQueueWithMessages  = "RT002"
	CodeQueueMessagesUnknown     = "RT003"
	CodeWaitQueueDraining        = "RT004"
	CodeReplaceExchange          = "RT005"
	CodeQueueHasConsumers        = "RT006"
	CodeSpecConflict             = "RT007"
	CodeOwnershipUnknown         = "RT008"
	CodeQueueLeftBehind          = "RT013"
	CodeQueueRetired             = "RT014"
	// Policy codes start at RT020; see policycheck.go.
	CodePolicyShadowed        = "RT020"
	CodeManagedPolicyShadowed = "RT021"
	CodeOperatorPolicyCaps    = "RT022"
	CodeArgumentPinned        = "RT023"
	CodePolicyApplies         = "RT024"
	CodeLegacyShape           = "RT025"
)

// Diagnostic is one finding of Check about one change.
type Diagnostic struct {
	Code     string
	Severity Severity
	Address  topology.Address
	Message  string
	// Messages is the number of messages concerned, 0 when none or unknown.
	Messages int64
	// Remedy is what the user could do about it, as data: Message does
	// not say it, and whoever shows the diagnostic words it (the CLI names
	// its flags) after Message.
	Remedy Remedy
}

// Remedy is what would accept a diagnostic, or clear it.
type Remedy struct {
	// Accepted: allowing destruction (CheckOptions.AllowDestroy) accepted
	// it.
	Accepted bool
	// AllowDestroy: allowing destruction would accept it; with Prune,
	// pruning would remove the queue with its messages.
	AllowDestroy bool
	// Otherwise: Message already gives one way out; the remedy is
	// another.
	Otherwise bool
	// StopConsumers: stopping the queue's consumers clears it, as
	// allowing destruction accepts it.
	StopConsumers bool
	// Migrate: migrating the queue (Choices.Migrate) keeps its messages.
	Migrate bool
	// Prune: pruning (Choices.Prune) removes the queue.
	Prune bool
	// PruneOnceEmpty: pruning removes the queue once it is empty, and
	// not before.
	PruneOnceEmpty bool
}

// CheckOptions are what the user has accepted, and what the checks judge
// the plan against beside the plan itself.
type CheckOptions struct {
	// AllowDestroy accepts that applying the plan destroys messages, turning
	// the errors about it into warnings.
	AllowDestroy bool
	// Specs names the spec of each vhost, for messages; may be nil.
	Specs map[string]string
	// State is what the plan was made from; with it, Check also refuses
	// what the broker would refuse only half-way through an apply (RT009
	// to RT011: policy keys, binding endpoints, features of the version).
	// Nil skips the checks that need the broker's topology.
	State *topology.State
	// Access is what the user applying the plan may do; nil skips RT012
	// (a plan against a definitions export has no user to judge).
	Access *topology.Access
	// Kept are the live queues that keep a layout auto would not give
	// them new (RT107).
	Kept []LayoutKept
	// Routes say how each work queue's retries travel (RT110, for the
	// queues whose route the plan makes or changes); nil for none.
	Routes []QueueRoute
}

// analyzer is one pass of Check over a plan. Each finds one kind of
// trouble; Check runs them all, in this order, so that plan, apply and
// anything else that checks a plan report the same diagnostics.
type analyzer struct {
	name string
	run  func(p Plan, c *checking) []Diagnostic
}

// checking is what an analyzer reads beside the plan.
type checking struct {
	CheckOptions
	// live is the broker's topology, nil without a State.
	live *topology.Topology
	// version is the one RabbitMQ version every analyzer judges by.
	version topology.Version
	// facts are version and what the live broker says of itself, for the
	// key table's verdicts.
	facts topology.Facts
}

var analyzers = []analyzer{
	{"ownership", func(p Plan, c *checking) []Diagnostic { return checkOwnership(p, c.CheckOptions) }},
	{"broker", func(p Plan, c *checking) []Diagnostic { return precheck(p, c.live, c.facts) }},
	{"destructive", checkChanges},
	{"policies", func(p Plan, c *checking) []Diagnostic { return checkPolicies(p, c.CheckOptions) }},
	{"version", func(p Plan, c *checking) []Diagnostic {
		return append(checkVersion(p, c.facts, c.State), checkNative(p, c.version)...)
	}},
	{"layout", func(p Plan, c *checking) []Diagnostic { return append(checkKept(c.Kept), checkRoutes(p, c.Routes)...) }},
	{"access", func(p Plan, c *checking) []Diagnostic {
		if c.Access == nil || !p.HasChanges() {
			return nil
		}
		return checkAccess(p, c.Specs, *c.Access)
	}},
}

// Check runs every analyzer over a plan: what it would destroy or leave
// behind, what the broker (at the version the plan is judged for, see
// Plan.RabbitMQ) would refuse, what the user may not do. It is separate
// from Diff so that the plan stays a description of changes and policy
// about them lives in one place. Severities come from the registry
// (Codes), softened by AllowDestroy where it accepts the code.
func Check(p Plan, opts CheckOptions) []Diagnostic {
	c := &checking{CheckOptions: opts, version: p.judgedVersion(opts.State)}
	c.facts = opts.State.Facts(c.version)
	if opts.State != nil {
		c.live = &opts.State.Topology
	}
	var ds []Diagnostic
	for _, a := range analyzers {
		ds = append(ds, a.run(p, c)...)
	}
	for i := range ds {
		if info, ok := LookupCode(ds[i].Code); ok {
			ds[i].Severity = info.severity(opts.AllowDestroy)
		}
	}
	return ds
}

// checkChanges finds, change by change, what the plan destroys (RT001 to
// RT003, RT006), replaces (RT005), keeps draining (RT004), leaves behind
// (RT013) or migrates (RT030, RT031).
func checkChanges(p Plan, opts *checking) []Diagnostic {
	destructive := SeverityError
	if opts.AllowDestroy {
		destructive = SeverityWarning
	}
	var ds []Diagnostic
	for _, c := range p.Changes {
		a := c.Address
		switch {
		case c.DestroysQueue():
			verb, code := "replacing", CodeReplaceQueueWithMessages
			remedy := destroyRemedy(opts.CheckOptions)
			remedy.Migrate = !remedy.Accepted
			if c.Action == Delete {
				verb, code, remedy = "deleting", CodeDeleteQueueWithMessages, destroyRemedy(opts.CheckOptions)
			}
			switch {
			case c.Messages() == nil:
				ds = append(ds, Diagnostic{Code: CodeQueueMessagesUnknown, Severity: destructive, Address: a, Remedy: remedy,
					Message: fmt.Sprintf("%s %s may destroy messages: its message count is unknown", verb, a)})
			case *c.Messages() > 0:
				ds = append(ds, Diagnostic{Code: code, Severity: destructive, Address: a, Messages: *c.Messages(), Remedy: remedy,
					Message: fmt.Sprintf("%s %s destroys %s", verb, a, countMessages(*c.Messages()))})
			}
			// Counts of ready messages leave out the deliveries that
			// consumers hold unacknowledged; a delete drops those too.
			if c.Consumers() != nil && *c.Consumers() > 0 {
				remedy := destroyRemedy(opts.CheckOptions)
				remedy.StopConsumers = !remedy.Accepted
				ds = append(ds, Diagnostic{Code: CodeQueueHasConsumers, Severity: destructive, Address: a, Remedy: remedy,
					Message: fmt.Sprintf("%s has %s, which may hold unacknowledged deliveries that %s it destroys",
						a, countConsumers(*c.Consumers()), verb)})
			}
		case c.Why() == WhyDraining:
			d := Diagnostic{Code: CodeWaitQueueDraining, Severity: SeverityInfo, Address: a}
			if c.Messages() != nil {
				d.Messages = *c.Messages()
				d.Message = fmt.Sprintf("retired wait queue %q in vhost %q is draining: %s waiting; a later apply deletes it once empty",
					a.Name, a.Vhost, countMessages(*c.Messages()))
			} else {
				d.Message = fmt.Sprintf("retired wait queue %q in vhost %q is kept: its message count is unknown; a later apply deletes it once empty",
					a.Name, a.Vhost)
			}
			ds = append(ds, d)
		case c.Why() == WhyLeftBehind:
			ds = append(ds, leftBehind(c))
		case c.Why() == WhyRetired && c.Action == NoOp:
			ds = append(ds, retiredDiagnostic(c))
		case c.Action == Migrate || c.Action == NoOp:
			if d, ok := checkMigration(c); ok {
				ds = append(ds, d)
			}
		case c.Address.Kind == topology.KindExchange && c.Action == Replace:
			ds = append(ds, Diagnostic{Code: CodeReplaceExchange, Severity: SeverityWarning, Address: a,
				Message: fmt.Sprintf("replacing %s: publishers may see unroutable messages between delete and create; "+
					"its bindings in the spec are re-created in the same apply", a)})
		}
	}
	return ds
}

// checkOwnership reports changes that two specs disagree on (RT007,
// always an error: no flag makes one spec's object right) and, once per
// vhost, a source that could not show ownership records (RT008).
func checkOwnership(p Plan, opts CheckOptions) []Diagnostic {
	var ds []Diagnostic
	maybe := map[string]int{}
	for _, c := range p.Changes {
		if c.Why() == WhyMayDelete {
			maybe[c.Address.Vhost]++
		}
		if len(c.Conflict()) == 0 {
			continue
		}
		this := "this spec"
		if n := opts.Specs[c.Address.Vhost]; n != "" {
			this = fmt.Sprintf("spec %q", n)
		}
		ds = append(ds, Diagnostic{Code: CodeSpecConflict, Severity: SeverityError, Address: c.Address,
			Message: fmt.Sprintf("%s: %s and spec %q (its ownership record in the vhost) declare it with different attributes; make them agree, or rename it in one of them",
				c.Address, this, strings.Join(c.Conflict(), `", "`))})
	}
	for _, v := range slices.Sorted(maps.Keys(maybe)) {
		ds = append(ds, Diagnostic{Code: CodeOwnershipUnknown, Severity: SeverityWarning,
			Address: topology.Address{Kind: topology.KindVhost, Name: v},
			Message: fmt.Sprintf("vhost %q: the source shows no ownership record, so which objects rmqtopo owns is unknown; %s listed as \"? may delete\": apply makes them only if the spec's record owns them", v, english.Count(maybe[v], "delete is", "deletes are"))})
	}
	return ds
}

// destroyRemedy is the remedy of what destroys messages: allowing it,
// or, once allowed, none.
func destroyRemedy(opts CheckOptions) Remedy {
	return Remedy{Accepted: opts.AllowDestroy, AllowDestroy: !opts.AllowDestroy}
}

func countMessages(n int64) string {
	if n == 1 {
		return "1 message"
	}
	return fmt.Sprintf("%d messages", n)
}

func countConsumers(n int64) string {
	if n == 1 {
		return "1 consumer"
	}
	return fmt.Sprintf("%d consumers", n)
}

// Blocking returns the diagnostics that must stop an apply.
func Blocking(ds []Diagnostic) []Diagnostic {
	var out []Diagnostic
	for _, d := range ds {
		if d.Severity == SeverityError {
			out = append(out, d)
		}
	}
	return out
}

// ActionCounts counts a plan's changes by action; the JSON plan calls it its "summary".
type ActionCounts struct {
	Create  int
	Update  int
	Replace int
	Delete  int
	NoOp    int
	Migrate int
}

// CountActions counts the plan's changes by action.
func (p Plan) CountActions() ActionCounts {
	var s ActionCounts
	for _, c := range p.Changes {
		switch c.Action {
		case Create:
			s.Create++
		case Update:
			s.Update++
		case Replace:
			s.Replace++
		case Delete:
			s.Delete++
		case NoOp:
			s.NoOp++
		case Migrate:
			s.Migrate++
		}
	}
	return s
}

// leftBehind warns of a queue this spec owned and dropped without prune:
// whatever it holds is read by nothing the spec declares.
func leftBehind(c Change) Diagnostic {
	d := Diagnostic{Code: CodeQueueLeftBehind, Severity: SeverityWarning, Address: c.Address}
	held := "its message count is unknown"
	if c.Messages() != nil {
		d.Messages = *c.Messages()
		held = "it holds " + countMessages(*c.Messages())
		if *c.Messages() == 0 {
			held = "it holds no messages"
		}
	}
	d.Remedy = Remedy{Prune: true, AllowDestroy: c.Messages() == nil || *c.Messages() > 0}
	d.Message = fmt.Sprintf("queue %q in vhost %q left the spec and is kept; %s", c.Address.Name, c.Address.Vhost, held)
	return d
}
