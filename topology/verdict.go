package topology

import "fmt"

// Facts are what a verdict of the key table depends on beside the table
// itself: the release, and what a live broker says of itself. A plan
// against a definitions export or a version flag knows only the release.
type Facts struct {
	Version Version
	// Deprecated holds each deprecated feature's phase as the broker
	// reports it (GET /api/deprecated-features, 3.13+):
	// "permitted_by_default", "denied_by_default", "disconnected" or
	// "removed". Nil when unknown: before 3.13, or not from a live broker.
	Deprecated map[string]string
	// Plugins holds the plugins enabled on every running node (GET
	// /api/nodes: its running applications). Nil when unknown.
	Plugins map[string]bool
}

// Phases of a deprecated feature (rabbit_deprecated_features.erl).
const (
	PhasePermitted    = "permitted_by_default"
	PhaseDenied       = "denied_by_default"
	PhaseDisconnected = "disconnected"
	PhaseRemoved      = "removed"
)

// Verdict is what a broker does with an entry of the key table.
type Verdict struct {
	Support Support
	// Default: the verdict is a default an operator can change, or rests on
	// what the facts cannot show (a plugin offline); Why says which.
	Default bool
	// Why says what the verdict rests on beyond the release, or "".
	Why string
}

// Judge is what a broker with facts x does with f, for any queue type.
func (f Feature) Judge(x Facts) Verdict {
	v := Verdict{Support: f.At(x.Version)}
	if f.deprecatedAt(x) {
		v = f.judgePermit(v, x)
	}
	if f.Plugin != "" && v.Support != Refused {
		switch {
		case x.Plugins == nil:
			v.Default = true
			v.Why = fmt.Sprintf("accepted only where the %s plugin is enabled, which only a live broker shows", f.Plugin)
		case !x.Plugins[f.Plugin]:
			v = Verdict{Support: Refused, Why: fmt.Sprintf("the %s plugin is not enabled", f.Plugin)}
		}
	}
	return v
}

// deprecatedAt reports whether f is a deprecated feature of the broker:
// the broker says so, or its release is one that has it.
func (f Feature) deprecatedAt(x Facts) bool {
	if f.Permit == "" {
		return false
	}
	if _, live := x.Deprecated[f.Permit]; live {
		return true
	}
	return x.Version.Known() && !x.Version.Less(f.DeprecatedSince)
}

// judgePermit is the verdict on an entry behind a deprecated feature: the
// phase the broker reports wins over the table's bounds.
func (f Feature) judgePermit(v Verdict, x Facts) Verdict {
	phase, live := x.Deprecated[f.Permit]
	if !live {
		phase = PhasePermitted
		if v.Support == Refused {
			phase = PhaseDenied
		}
	}
	switch phase {
	case PhasePermitted:
		if v.Support == Refused {
			v.Support = Accepted
		}
		return Verdict{Support: v.Support, Default: true,
			Why: fmt.Sprintf("deprecated: permitted by default; operators can deny it with deprecated_features.permit.%s = false in rabbitmq.conf", f.Permit)}
	case PhaseDenied:
		return Verdict{Support: Refused, Default: true,
			Why: fmt.Sprintf("deprecated: denied by default; operators can lift it with deprecated_features.permit.%s = true in rabbitmq.conf", f.Permit)}
	}
	return Verdict{Support: Refused, Why: fmt.Sprintf("deprecated feature %s is %s", f.Permit, phase)}
}

// JudgeOn is what a broker with facts x does with f on a queue of type
// typ: Judge, and a queue type refuses the arguments (and properties) of
// the other types that the release knows. An argument the release does not
// know yet is not checked at all.
func (f Feature) JudgeOn(typ string, x Facts) Verdict {
	v := f.Judge(x)
	if v.Support == Refused || f.AcceptsTypeAt(typ, x.Version) {
		return v
	}
	if f.Since.Known() && x.Version.Known() && x.Version.Less(f.Since) {
		return v
	}
	if f.Kind == FeaturePolicyKey {
		return Verdict{Support: Ignored, Why: fmt.Sprintf("%s queues ignore it", typ)}
	}
	return Verdict{Support: Refused, Why: fmt.Sprintf("a %s queue refuses it", typ)}
}
