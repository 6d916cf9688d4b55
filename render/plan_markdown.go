package render

import (
	"io"
	"strings"

	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

// PlanMarkdown writes the plan as a pull-request comment: the summary as a
// heading, what needs attention first, a table of the changes, and the full
// text plan folded away in a diff block.
func PlanMarkdown(w io.Writer, p plan.Plan, diags []plan.Diagnostic) error {
	doc := newPlanDocument(p, diags)
	pw := &planWriter{w: w}
	s := doc.Summary
	if doc.hasChanges() {
		pw.printf("### rmqtopo plan: %d to create, %d to update, %d to replace, %d to delete\n\n",
			s.Create, s.Update, s.Replace, s.Delete)
	} else {
		pw.printf("### rmqtopo plan: no changes\n\nThe broker matches the spec.\n\n")
	}

	for _, group := range []struct {
		severity plan.Severity
		title    string
		icon     string
	}{
		{plan.SeverityError, "Errors", "⛔"},
		{plan.SeverityWarning, "Warnings", "⚠️"},
		{plan.SeverityInfo, "Notes", "ℹ️"},
	} {
		var items []plan.Diagnostic
		for _, d := range doc.Diagnostics {
			if d.Severity == group.severity {
				items = append(items, d)
			}
		}
		if len(items) == 0 {
			continue
		}
		pw.printf("**%s**\n\n", group.title)
		for _, d := range items {
			pw.printf("- %s %s %s\n", group.icon, mdCode(d.Code), mdEscape(d.Message))
		}
		pw.printf("\n")
	}

	if !doc.hasChanges() {
		return pw.err
	}
	pw.printf("| Action | Kind | Name | Vhost | Reason |\n")
	pw.printf("| --- | --- | --- | --- | --- |\n")
	for _, c := range doc.Changes {
		name := mdCode(c.Address.Name)
		if c.Address.Key != "" {
			name += " " + mdCode(c.Address.Key)
		}
		vhost := ""
		if c.Address.Kind != topology.KindVhost {
			vhost = mdCode(c.Address.Vhost)
		}
		reasons := []string{}
		if c.Reason != "" {
			reasons = append(reasons, c.Reason)
		}
		if c.Messages != nil && *c.Messages > 0 {
			reasons = append(reasons, planMessagesAtStake(c))
		}
		reason := mdEscape(strings.Join(reasons, "; "))
		pw.printf("| %s | %s | %s | %s | %s |\n", mdAction(c.Action), c.Address.Kind,
			mdCell(name), mdCell(vhost), mdCell(reason))
	}

	var text strings.Builder
	if err := writePlanText(&text, doc, planLayout{}); err != nil {
		return err
	}
	fence := mdFence(text.String())
	pw.printf("\n<details>\n<summary>Full plan</summary>\n\n%sdiff\n%s%s\n\n</details>\n", fence, text.String(), fence)
	return pw.err
}

func mdAction(a plan.Action) string {
	switch a {
	case plan.Create:
		return "➕ create"
	case plan.Update:
		return "✏️ update"
	case plan.Replace:
		return "♻️ replace"
	case plan.Delete:
		return "🗑️ delete"
	}
	return string(a)
}

// mdCode renders s as a code span whose fence outlasts any backticks in s.
func mdCode(s string) string {
	if s == "" {
		return `""`
	}
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " "
	}
	return fence + s + fence
}

// mdCell keeps a table cell on its row: a pipe ends a cell even inside a code
// span, and a newline ends the row.
func mdCell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

// mdEscape stops prose from names and reasons being read as Markdown or
// HTML.
func mdEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune("\\`*_[]<>#|~", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// mdFence returns a code fence longer than any run of backticks in s.
func mdFence(s string) string {
	fence := "```"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	return fence
}
