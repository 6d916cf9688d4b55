package upgrade

import "slices"

// Severity of a verdict: what the target refuses is an error (the
// upgrade breaks a declaration or a client), and so is what it does
// differently when that loses messages without a word (UP118); what it
// ignores or does differently otherwise is a warning.
type Severity string

// Severities.
const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
)

// Effect says what the target does with the object.
type Effect string

// Effects.
const (
	Refused    Effect = "refused"
	Ignored    Effect = "ignored"
	Different  Effect = "different"
	Deprecated Effect = "deprecated"
	// NeedsPlugin: the target has it once a plugin its packages ship is
	// enabled.
	NeedsPlugin Effect = "needs-plugin"
)

// Codes of the preview's verdicts.
const (
	CodeArgumentRefused   = "UP101"
	CodePolicyKeyRefused  = "UP102"
	CodeArgumentIgnored   = "UP103"
	CodePolicyKeyIgnored  = "UP104"
	CodeTransientQueue    = "UP105"
	CodeDefaultLimit      = "UP106"
	CodeNackNotCounted    = "UP107"
	CodeConsumerTimeout   = "UP108"
	CodeGlobalQoS         = "UP109"
	CodeClientDeath       = "UP110"
	CodeDeprecatedInUse   = "UP111"
	CodeDeprecatedUnknown = "UP112"
	CodeGlobalQoSUnseen   = "UP113"
	CodeTopicHashes       = "UP114"
	// Exchanges (exchanges.go).
	CodeExchangeTypeMissing = "UP115"
	CodeExchangeTypePlugin  = "UP116"
	CodeExchangeBindingGone = "UP117"
	CodeExchangePointerGone = "UP118"
	CodeExchangeTypeUnseen  = "UP119"
)

// CodeInfo is the registry's entry of a code (docs/upgrades.md lists
// them; a test holds the two together).
type CodeInfo struct {
	Code     string
	Severity Severity
	Effect   Effect
	Meaning  string
}

// Codes is every code of the preview, in code order.
var Codes = []CodeInfo{
	{CodeArgumentRefused, SeverityError, Refused, "a queue argument (x-queue-version 1, x-queue-master-locator) the target refuses to declare"},
	{CodePolicyKeyRefused, SeverityError, Refused, "a policy or operator policy key (ha-*, queue-master-locator) the target refuses"},
	{CodeArgumentIgnored, SeverityWarning, Ignored, "a queue argument the target accepts and does nothing with (x-queue-mode, x-max-in-memory-*)"},
	{CodePolicyKeyIgnored, SeverityWarning, Ignored, "a policy key the target accepts and does nothing with (queue-mode, max-in-memory-*)"},
	{CodeTransientQueue, SeverityWarning, Deprecated, "a transient non-exclusive queue: a deprecated feature a broker refuses once it is denied"},
	{CodeDefaultLimit, SeverityWarning, Different, "4.0+: a quorum queue without a delivery limit gets 20; the 21st delivery dead-letters or drops the message"},
	{CodeNackNotCounted, SeverityWarning, Different, "4.3+: basic.nack with requeue no longer counts toward a quorum queue's delivery limit (basic.reject does)"},
	{CodeConsumerTimeout, SeverityWarning, Ignored, "4.3+: classic queues apply no consumer timeout (policy, argument or consumer_timeout)"},
	{CodeGlobalQoS, SeverityWarning, Different, "4.3+: a channel with global QoS (basic.qos global=true), which the target takes as a prefetch per consumer"},
	{CodeClientDeath, SeverityWarning, Ignored, "4.0+: x-death headers clients publish are ignored (dead-letter counts and cycles start over)"},
	{CodeDeprecatedInUse, SeverityWarning, Deprecated, "a deprecated feature the broker reports in use"},
	{CodeDeprecatedUnknown, SeverityWarning, Deprecated, "the source cannot say which deprecated features are in use (no /api/deprecated-features/used before 3.13)"},
	{CodeGlobalQoSUnseen, SeverityWarning, Different, "4.3+: the source (4.0 on) does not show which channels use global QoS"},
	{CodeTopicHashes, SeverityError, Refused, "4.3.5+: a topic binding key with more than two # wildcards, which the target refuses to bind"},
	{CodeExchangeTypeMissing, SeverityError, Refused, "an exchange of a type no package of the target ships (x-delayed-message; a third-party plugin's type), which the target refuses to declare"},
	{CodeExchangeTypePlugin, SeverityWarning, NeedsPlugin, "an exchange of a type whose plugin the target ships disabled (x-consistent-hash, x-random, x-recent-history, x-jms-topic, x-modulus-hash): refused until the plugin is enabled"},
	{CodeExchangeBindingGone, SeverityError, Refused, "a binding from an exchange of UP115, or to one (exchange to exchange), which the target cannot make"},
	{CodeExchangePointerGone, SeverityError, Different, "an alternate-exchange or dead-letter exchange (argument or policy key) naming an exchange of UP115: the target accepts it and drops what it would send there"},
	{CodeExchangeTypeUnseen, SeverityWarning, Refused, "an exchange type the source has enabled (node-wide) that no exchange of the vhost uses and the target lacks or ships disabled"},
}

// LookupCode returns the registry's entry of code.
func LookupCode(code string) (CodeInfo, bool) {
	i := slices.IndexFunc(Codes, func(c CodeInfo) bool { return c.Code == code })
	if i < 0 {
		return CodeInfo{}, false
	}
	return Codes[i], true
}
