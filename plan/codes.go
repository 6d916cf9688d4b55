package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rmqtopo/rmqtopo/internal/english"
	"github.com/rmqtopo/rmqtopo/rabbitmq"
	"github.com/rmqtopo/rmqtopo/topology"
)

// CodeInfo is what every part of rmqtopo knows about one diagnostic code:
// Check sets severities from it, the CLI words its refusals and picks its
// exit code from it, and a test holds docs/plan-json.md to it.
type CodeInfo struct {
	Code string
	// Severity is the code's severity without --allow-destroy.
	Severity Severity
	// AllowDestroy: --allow-destroy accepts it, making the error a
	// warning (messages at risk, which the user may accept).
	AllowDestroy bool
	// Refused: the broker itself would refuse the change, half-way through
	// an apply; rmqtopo refuses the plan before the first write instead,
	// and no flag accepts it.
	Refused bool
	// Ignored, on a Refused code, says that the broker would accept the
	// change and silently not do it, rather than refuse it: the phrase
	// names what it would not do ("delay retries"), for the
	// refusal's summary.
	Ignored string
	// Meaning is one line for people.
	Meaning string
}

// firstDefaultLimit is the first release that gives a quorum queue a
// delivery limit by default (RT101).
var firstDefaultLimit = rabbitmq.First(func(p rabbitmq.Profile) bool { return p.DefaultDeliveryLimit() > 0 })

// keyFrom is the series of a bound of a queue argument's entry in the key
// table (RT103, RT105).
func keyFrom(bound func(topology.Feature) rabbitmq.Version, arg string, value any) string {
	f, _ := topology.LookupFeature(topology.FeatureQueueArgument, arg, value)
	return bound(f).Series()
}

// Codes is the registry of every diagnostic code, in code order.
var Codes = []CodeInfo{
	{Code: CodeReplaceQueueWithMessages, Severity: SeverityError, AllowDestroy: true, Meaning: "replacing a queue destroys the messages it holds"},
	{Code: CodeDeleteQueueWithMessages, Severity: SeverityError, AllowDestroy: true, Meaning: "deleting a queue destroys the messages it holds"},
	{Code: CodeQueueMessagesUnknown, Severity: SeverityError, AllowDestroy: true, Meaning: "a queue replace or delete whose message count is unknown"},
	{Code: CodeWaitQueueDraining, Severity: SeverityInfo, Meaning: "a retired wait queue is kept while it drains; a later apply deletes it once empty"},
	{Code: CodeReplaceExchange, Severity: SeverityWarning, Meaning: "an exchange replace: publishers may see unroutable messages between delete and create"},
	{Code: CodeQueueHasConsumers, Severity: SeverityError, AllowDestroy: true, Meaning: "a queue replace or delete while consumers are attached, which may hold unacknowledged deliveries"},
	{Code: CodeSpecConflict, Severity: SeverityError, Meaning: "two specs' ownership records want one object with different attributes"},
	{Code: CodeOwnershipUnknown, Severity: SeverityWarning, Meaning: "the source shows no ownership record; deletes are \"? may delete\""},
	{Code: CodeUnknownPolicyKey, Severity: SeverityError, Refused: true, Meaning: "a policy key the judged RabbitMQ version does not accept"},
	{Code: CodeMissingEndpoint, Severity: SeverityError, Refused: true, Meaning: "a binding's source or destination exists nowhere, or is a reserved amq.* name that is not a built-in exchange"},
	{Code: CodeUnsupported, Severity: SeverityError, Refused: true, Meaning: "a queue type or argument the judged version or the queue's type lacks"},
	{Code: CodeAccess, Severity: SeverityError, Refused: true, Meaning: "a change the user's tags or permissions do not allow"},
	{Code: CodeQueueLeftBehind, Severity: SeverityWarning, Meaning: "a queue this spec owned left the spec and is kept (not pruned)"},
	{Code: CodeQueueRetired, Severity: SeverityInfo, Meaning: "retired: a hand-made queue the spec retires is kept while it may hold messages; delete it with prune once empty"},
	{Code: CodePolicyShadowed, Severity: SeverityWarning, Meaning: "a user policy matches queues whose rmqtopo policy wins: its keys do not apply to them"},
	{Code: CodeManagedPolicyShadowed, Severity: SeverityError, AllowDestroy: true, Meaning: "a user policy wins over (or ties with) rmqtopo's policy of queues: their dead-lettering and limits do not apply"},
	{Code: CodeOperatorPolicyCaps, Severity: SeverityInfo, Meaning: "an operator policy caps a limit below rmqtopo's policy"},
	{Code: CodeArgumentPinned, Severity: SeverityInfo, Meaning: "an adopted queue keeps arguments its policy now carries, a limit as a ceiling"},
	{Code: CodePolicyApplies, Severity: SeverityInfo, Meaning: "a user policy applies to queues the spec declares without an rmqtopo policy: its keys take effect there"},
	{Code: CodeLegacyShape, Severity: SeverityInfo, Meaning: "queues that lack arguments the spec wants (made by an earlier rmqtopo, or dlq turned on) keep them in their own policies"},
	{Code: CodeMigrateQueue, Severity: SeverityInfo, Meaning: "a queue migration: the messages it moves, the unroutable window of the default exchange, consumers cancelled"},
	{Code: CodeMigrationOrphaned, Severity: SeverityWarning, Meaning: "an unfinished migration's temporary queue holds messages of a queue no longer in the spec"},
	{Code: CodeDefaultDeliveryLimit, Severity: SeverityWarning, Meaning: fmt.Sprintf("%s+: a quorum queue that delivers to consumers, without a delivery limit (argument or policy), gets the default of %d", firstDefaultLimit.Series(), rabbitmq.ProfileFor(firstDefaultLimit).DefaultDeliveryLimit())},
	{Code: CodeClientDeathIgnored, Severity: SeverityInfo, Meaning: rabbitmq.First(rabbitmq.Profile.ClientDeathIgnored).Series() + "+: the broker ignores x-death headers that clients publish"},
	{Code: CodeRefusedArgument, Severity: SeverityError, Refused: true, Meaning: keyFrom(func(f topology.Feature) rabbitmq.Version { return f.Until }, "x-queue-version", int64(1)) + "+: a queue argument the broker refuses to declare (x-queue-version 1, x-queue-master-locator by default)"},
	{Code: CodeTransientQueue, Severity: SeverityError, Refused: true, Meaning: "a transient non-exclusive queue, where the broker's deprecated feature transient_nonexcl_queues is denied"},
	{Code: CodeQueueModeIgnored, Severity: SeverityInfo, Meaning: keyFrom(func(f topology.Feature) rabbitmq.Version { return f.IgnoredSince }, "x-queue-mode", nil) + "+: x-queue-mode, which the broker ignores"},
	{Code: CodeNativeNeedsVersion, Severity: SeverityError, Refused: true, Ignored: "delay retries", Meaning: fmt.Sprintf("below %s: a queue of layout native, whose retries the broker would not delay", rabbitmq.First(rabbitmq.Profile.NativeDelayedRetry))},
	{Code: CodeLayoutKept, Severity: SeverityInfo, Meaning: "a live queue keeps its layout where auto gives a new queue another; how to move it"},
	{Code: CodeDefaultVerdict, Severity: SeverityWarning, Meaning: "the broker accepts a key, argument or transient queue only by a default operators can change, or only with a plugin the source cannot show"},
	{Code: CodeKeptLayoutConflict, Severity: SeverityError, Meaning: "the spec asks of a live queue whose layout auto keeps what that layout cannot do (delivery_limit or a return queue on a native queue)"},
	{Code: CodeRetryRoute, Severity: SeverityInfo, Meaning: "how the retries of a work queue the plan creates or whose route it changes travel, and whether RetryAfter is honoured there"},
	{Code: CodeOthersLate, Severity: SeverityInfo, Meaning: "beside RT110, where a return queue holds the retries for retry.Consume: what a consumer that is not Consume sees of them"},
}

// LookupCode returns the registry's entry of code.
func LookupCode(code string) (CodeInfo, bool) {
	i := slices.IndexFunc(Codes, func(c CodeInfo) bool { return c.Code == code })
	if i < 0 {
		return CodeInfo{}, false
	}
	return Codes[i], true
}

// severity is the code's severity once the user has (or has not)
// accepted destruction.
func (c CodeInfo) severity(allowDestroy bool) Severity {
	if c.AllowDestroy && allowDestroy {
		return SeverityWarning
	}
	return c.Severity
}

// Refusals returns the diagnostics of ds that the broker itself would
// refuse (CodeInfo.Refused): no flag accepts them.
func Refusals(ds []Diagnostic) []Diagnostic {
	var out []Diagnostic
	for _, d := range ds {
		if info, _ := LookupCode(d.Code); info.Refused && d.Severity == SeverityError {
			out = append(out, d)
		}
	}
	return out
}

// BlockedError is a plan refused for its blocking diagnostics (see
// Blocking), as data: what the broker would refuse needs a changed spec;
// what only puts messages at risk, destruction allowed. The CLI words it.
type BlockedError struct {
	// Diagnostics are the blocking ones.
	Diagnostics []Diagnostic
}

// BlockingError is the error of a plan with the blocking diagnostics b;
// nil when b is empty.
func BlockingError(b []Diagnostic) error {
	if len(b) == 0 {
		return nil
	}
	return &BlockedError{Diagnostics: b}
}

// Codes lists the blocking codes, each once, in order of appearance.
func (e *BlockedError) Codes() []string {
	var list []string
	for _, d := range e.Diagnostics {
		if !slices.Contains(list, d.Code) {
			list = append(list, d.Code)
		}
	}
	return list
}

// OnlyAtRisk reports whether allowing destruction (CheckOptions.AllowDestroy)
// would accept every blocking diagnostic: they put messages at risk, and
// nothing else blocks.
func (e *BlockedError) OnlyAtRisk() bool {
	return e.count(func(c CodeInfo) bool { return c.AllowDestroy }) == len(e.Diagnostics)
}

// OnlyRefused reports whether the broker itself would refuse every
// blocking diagnostic.
func (e *BlockedError) OnlyRefused() bool {
	return e.count(func(c CodeInfo) bool { return !c.AllowDestroy && c.Refused }) == len(e.Diagnostics)
}

func (e *BlockedError) count(f func(CodeInfo) bool) int {
	n := 0
	for _, d := range e.Diagnostics {
		if info, _ := LookupCode(d.Code); f(info) {
			n++
		}
	}
	return n
}

// refusedText says what RabbitMQ would do with the changes of a plan that
// only it would refuse: refuse them, or accept some and silently not do
// what they ask (CodeInfo.Ignored), which is no refusal.
func (e *BlockedError) refusedText() string {
	var refused, ignored []Diagnostic
	for _, d := range e.Diagnostics {
		if info, _ := LookupCode(d.Code); info.Ignored != "" {
			ignored = append(ignored, d)
		} else {
			refused = append(refused, d)
		}
	}
	var parts []string
	// count is n changes, "of this plan" after the first count only.
	count := func(n int) string {
		if len(parts) == 0 {
			return english.Count(n, "change", "changes") + " of this plan"
		}
		return english.Count(n, "change", "changes")
	}
	if n := len(refused); n > 0 {
		parts = append(parts, fmt.Sprintf("refuse %s (%s)", count(n), strings.Join((&BlockedError{refused}).Codes(), ", ")))
	}
	for _, code := range (&BlockedError{ignored}).Codes() {
		info, _ := LookupCode(code)
		n := 0
		for _, d := range ignored {
			if d.Code == code {
				n++
			}
		}
		parts = append(parts, fmt.Sprintf("accept %s and silently not %s (%s)", count(n), info.Ignored, code))
	}
	return "RabbitMQ would " + strings.Join(parts, ", and ")
}

// AtRisk says how many changes put messages at risk, and their codes.
func (e *BlockedError) AtRisk() string {
	n := len(e.Diagnostics)
	return fmt.Sprintf("%d %s messages at risk (%s)", n, english.Plural(n, "change puts", "changes put"), strings.Join(e.Codes(), ", "))
}

// Error is the refusal in one line.
func (e *BlockedError) Error() string {
	n, codes := len(e.Diagnostics), strings.Join(e.Codes(), ", ")
	switch {
	case e.OnlyAtRisk():
		return e.AtRisk() + "; apply refuses unless destruction is allowed"
	case e.OnlyRefused():
		return e.refusedText() + "; nothing was written: fix the spec (see the errors above)"
	}
	return fmt.Sprintf("%d %s cannot be applied (%s); nothing was written: fix the spec (see the errors above)",
		n, english.Plural(n, "change", "changes"), codes)
}
