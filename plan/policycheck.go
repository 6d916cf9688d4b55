package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/english"
	"github.com/rmqtopo/rmqtopo/topology"
)

// checkPolicies turns the plan's policy conflicts and adopted queues into
// diagnostics, after those of the changes.
func checkPolicies(p Plan, opts CheckOptions) []Diagnostic {
	var ds []Diagnostic
	for _, c := range p.Changes {
		if c.Action == NoOp && len(c.Pinned()) > 0 && c.Before != nil && c.Before.Queue != nil {
			ds = append(ds, Diagnostic{Code: CodeArgumentPinned, Severity: SeverityInfo, Address: c.Address,
				Message: fmt.Sprintf("%s is adopted as it is, with its policy %q: %s", c.Address,
					contract.QueuePolicy(c.Address.Name), pinnedText(*c.Before.Queue, c.Pinned()))})
		}
	}
	ds = append(ds, checkLegacy(p)...)
	for _, c := range p.PolicyConflicts {
		a := topology.Address{Kind: topology.KindPolicy, Vhost: c.Vhost, Name: c.Policy}
		queues := objectList(c)
		n := len(c.Queues) + len(c.Exchanges)
		switch c.Kind {
		case ConflictShadowed:
			ds = append(ds, Diagnostic{Code: CodePolicyShadowed, Severity: SeverityWarning, Address: a,
				Message: fmt.Sprintf("policy %q (priority %d) in vhost %q matches %s, whose rmqtopo policy (priority %d) wins: "+
					"its keys %s do not apply to %s; narrow its pattern to leave them out, or set the attribute in the spec",
					c.Policy, c.Priority, c.Vhost, queues, contract.ManagedPolicyPriority, strings.Join(c.Keys, ", "), english.Plural(n, "it", "them"))})
		case ConflictShadows:
			sev := SeverityError
			hint := fmt.Sprintf("; narrow its pattern to leave them out or lower its priority below %d", contract.ManagedPolicyPriority)
			remedy := Remedy{AllowDestroy: true, Otherwise: true}
			if opts.AllowDestroy {
				sev, hint, remedy = SeverityWarning, "", Remedy{Accepted: true}
			}
			ds = append(ds, Diagnostic{Code: CodeManagedPolicyShadowed, Severity: sev, Address: a, Remedy: remedy,
				Message: fmt.Sprintf("policy %q (priority %d) in vhost %q takes the place of rmqtopo's policy of %s: "+
					"rmqtopo's %s do not apply, so messages rejected or expired there may be lost%s",
					c.Policy, c.Priority, c.Vhost, queues, strings.Join(c.Keys, ", "), hint)})
		case ConflictApplies:
			ds = append(ds, Diagnostic{Code: CodePolicyApplies, Severity: SeverityInfo, Address: a,
				Message: fmt.Sprintf("policy %q (priority %d) in vhost %q applies to %s, which %s no rmqtopo policy: its keys %s take effect there "+
					"(a queue's own arguments win over it, but for the lower numeric limit); narrow its pattern to leave them out, or set the attribute in the spec",
					c.Policy, c.Priority, c.Vhost, queues, english.Plural(n, "has", "have"), strings.Join(c.Keys, ", "))})
		case ConflictCapped:
			var caps []string
			for _, k := range c.Keys {
				v := c.Capped[k]
				caps = append(caps, fmt.Sprintf("%s %s (the spec wants %s)", k, FormatValue(v[0], true), FormatValue(v[1], true)))
			}
			ds = append(ds, Diagnostic{Code: CodeOperatorPolicyCaps, Severity: SeverityInfo, Address: a,
				Message: fmt.Sprintf("operator policy %q in vhost %q caps %s: effective %s", c.Policy, c.Vhost, queues, strings.Join(caps, ", "))})
		}
	}
	return ds
}

// objectList names up to three of a conflict's queues and exchanges and
// counts the rest.
func objectList(c PolicyConflict) string {
	var parts []string
	if len(c.Queues) > 0 {
		parts = append(parts, nameList(english.Plural(len(c.Queues), "queue", "queues"), c.Queues))
	}
	if len(c.Exchanges) > 0 {
		parts = append(parts, nameList(english.Plural(len(c.Exchanges), "exchange", "exchanges"), c.Exchanges))
	}
	return strings.Join(parts, " and ")
}

func nameList(kind string, names []string) string {
	const show = 3
	quoted := make([]string, 0, show)
	for i, n := range names {
		if i == show {
			break
		}
		quoted = append(quoted, fmt.Sprintf("%q", n))
	}
	s := kind + " " + strings.Join(quoted, ", ")
	if len(names) > show {
		s += fmt.Sprintf(" and %d more", len(names)-show)
	}
	return s
}

// checkLegacy says, per vhost, which queues keep the shape an earlier
// rmqtopo gave them (legacy.go): invisible in a plan, which leaves them
// as they are, and a cost the broker keeps paying.
func checkLegacy(p Plan) []Diagnostic {
	byVhost := map[string][]string{}
	keys := map[string]map[string]bool{}
	var vhosts []string
	for _, c := range p.Changes {
		if c.Action != NoOp || len(c.InPolicy()) == 0 {
			continue
		}
		v := c.Address.Vhost
		if _, ok := byVhost[v]; !ok {
			vhosts = append(vhosts, v)
			keys[v] = map[string]bool{}
		}
		byVhost[v] = append(byVhost[v], c.Address.Name)
		for _, k := range c.InPolicy() {
			keys[v][k] = true
		}
	}
	var ds []Diagnostic
	for _, v := range vhosts {
		names := byVhost[v]
		n := len(names)
		ds = append(ds, Diagnostic{Code: CodeLegacyShape, Severity: SeverityInfo,
			Address: topology.Address{Kind: topology.KindVhost, Name: v},
			Message: fmt.Sprintf("%s in vhost %q lack%s arguments the spec wants (%s), as queues an earlier rmqtopo made do, "+
				"or a queue declared before its dlq was turned on: arguments are immutable, so %s own policy carries them instead, "+
				"which the broker matches on every declare and policy write (migrate: true on a queue moves them into its arguments, its messages kept)",
				nameList(english.Plural(n, "queue", "queues"), names), v, english.Plural(n, "s", ""),
				strings.Join(slices.Sorted(maps.Keys(keys[v])), ", "), english.Plural(n, "its", "each queue's"))})
	}
	return ds
}
