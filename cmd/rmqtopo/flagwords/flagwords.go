// Package flagwords is the CLI's words for what the library reports as
// data: the flags that would accept a diagnostic or clear it, and the
// flag that overrides the RabbitMQ version a plan is judged for. Library
// packages name no flag (internal/archtest checks); the CLI words their
// diagnostics here before it shows or saves them, and the tests that
// compare the CLI's output (render's golden files, plan's convergence
// corpus) word them the same way.
package flagwords

import "github.com/rmqtopo/rmqtopo/plan"

// Remedy words r as the end of a diagnostic's message.
func Remedy(r plan.Remedy) string {
	switch {
	case r.Prune && r.AllowDestroy:
		return "; drain it, or rmqtopo apply --prune --allow-destroy SPEC removes it with them"
	case r.Prune:
		return "; rmqtopo apply --prune SPEC removes it"
	case r.PruneOnceEmpty:
		return "; delete with --prune once empty (rmqtopo apply --prune SPEC deletes it then, never before)"
	case r.Accepted:
		return " (accepted with --allow-destroy)"
	case r.StopConsumers:
		return "; stop them or re-run with --allow-destroy"
	case r.AllowDestroy:
		s := "; re-run with --allow-destroy to accept"
		if r.Otherwise {
			s = ", or re-run with --allow-destroy to accept"
		}
		if r.Migrate {
			s += ", or --migrate to keep them (see RT030)"
		}
		return s
	}
	return ""
}

// Diagnostics words the remedy of each diagnostic into its message, in
// place, and clears the remedy, so that wording twice words once.
func Diagnostics(ds []plan.Diagnostic) []plan.Diagnostic {
	for i := range ds {
		ds[i].Message += Remedy(ds[i].Remedy)
		ds[i].Remedy = plan.Remedy{}
	}
	return ds
}

// MarkdownSeeAll is where the Markdown plan sends a reader for the changes
// a long plan leaves out (render.MarkdownOptions.SeeAll).
const MarkdownSeeAll = "See them all with `rmqtopo show PLANFILE` (a plan saved with `rmqtopo plan --out PLANFILE`), " +
	"or in the JSON plan (`rmqtopo plan -f json`, `rmqtopo show -f json PLANFILE`) kept as the pipeline's artifact."

// RabbitMQVersion is the flag that gives the RabbitMQ version a plan is
// judged for (plan's override, plan.FromOverride), as the CLI spells it
// (cmd/rmqtopo's rabbitVersionFlag and layoutVersionFlag).
const RabbitMQVersion = "--rabbitmq-version"
