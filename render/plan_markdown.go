package render

import (
	"fmt"
	"html"
	"io"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/english"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/plan/planjson"
)

// MarkdownOptions is what only the Markdown plan's caller knows.
type MarkdownOptions struct {
	// SeeAll ends the note on the changes a long plan leaves out: where a
	// reader sees them all (the caller's commands for a whole plan).
	SeeAll string
	// VersionFlag is the caller's override of the RabbitMQ version a plan
	// is judged for (the CLI's --rabbitmq-version flag), which the
	// plan's header names; empty: a caller without one.
	VersionFlag string
}

// MarkdownLimit bounds the characters of a Markdown plan: a GitHub comment
// holds 65,536, and the rest is room for what a pipeline wraps around it.
const MarkdownLimit = 60000

// PlanMarkdown writes the plan as a pull-request comment. The summary comes
// first and is always whole: the counts per action, every destructive
// change and every diagnostic in full. Then the changes, grouped by the
// spec's queue (the work queue and what was generated for it; a vhost's
// shared objects last), each group a collapsible <details> block holding
// its part of the text plan, open when it destroys something. Groups and
// names are in natural order (svc2 before svc10). Groups are added while
// the whole stays within MarkdownLimit; the rest are counted at the end,
// with where to see them (MarkdownOptions.SeeAll).
func PlanMarkdown(w io.Writer, p plan.Plan, diags []plan.Diagnostic, o MarkdownOptions) error {
	doc := planjson.NewDocument(p, diags)
	var out strings.Builder
	writeMarkdownSummary(&out, doc, o.VersionFlag)
	if doc.HasChanges() {
		writeMarkdownGroups(&out, groupChanges(p.Changes), len(doc.Changes), MarkdownLimit, o.SeeAll)
	}
	_, err := io.WriteString(w, out.String())
	return err
}

func writeMarkdownSummary(out *strings.Builder, doc planjson.Document, versionFlag string) {
	s := doc.Summary
	if !doc.HasChanges() {
		out.WriteString("### rmqtopo plan: no changes\n\nThe broker matches the spec.\n\n")
	} else {
		fmt.Fprintf(out, "### rmqtopo plan: %d to create, %d to update, %d to replace, %d to delete%s\n\n",
			s.Create, s.Update, s.Replace, s.Delete, migrateSummary(s))
	}
	if doc.RabbitMQ != nil {
		out.WriteString(mdEscape(judgedLine(*doc.RabbitMQ, versionFlag)) + ".\n\n")
	}
	writeMarkdownDestructive(out, doc.Changes)
	writeMarkdownDiagnostics(out, doc.Diagnostics)
}

// writeMarkdownDestructive lists the replacements and deletions among
// changes, but routine ones, by name; nothing when there are none.
func writeMarkdownDestructive(out *strings.Builder, changes []plan.Change) {
	var destructive []plan.Change
	rerouted := reroutedBindings(changes)
	for _, c := range changes {
		if (c.Action == plan.Replace || c.Action == plan.Delete) && !routineDelete(c, rerouted) {
			destructive = append(destructive, c)
		}
	}
	sort.SliceStable(destructive, func(i, j int) bool { return naturalLess(destructive[i].Address.Name, destructive[j].Address.Name) })
	if len(destructive) > 0 {
		out.WriteString("**Destructive changes**\n\n")
		for _, c := range destructive {
			action := mdAction(c.Action)
			if c.Why() == plan.WhyMayDelete {
				action = "❓ may delete"
			}
			fmt.Fprintf(out, "- %s %s %s", action, c.Address.Kind, mdCode(c.Address.Name))
			if c.Address.Key != "" {
				out.WriteString(" " + mdCode(c.Address.Key))
			}
			fmt.Fprintf(out, " in vhost %s", mdCode(c.Address.Vhost))
			if why := mdReasons(c); why != "" {
				out.WriteString(": " + mdEscape(why))
			}
			out.WriteString("\n")
		}
		out.WriteString("\n")
	}
}

// writeMarkdownDiagnostics lists the diagnostics under a title for each
// severity that has any: errors, then warnings, then notes.
func writeMarkdownDiagnostics(out *strings.Builder, diagnostics []plan.Diagnostic) {
	for _, group := range []struct {
		severity plan.Severity
		title    string
		icon     string
	}{
		{plan.SeverityError, "Errors", "⛔"},
		{plan.SeverityWarning, "Warnings", "⚠️"},
		{plan.SeverityInfo, "Notes", "ℹ️"},
	} {
		title := false
		for _, d := range diagnostics {
			if d.Severity != group.severity {
				continue
			}
			if !title {
				fmt.Fprintf(out, "**%s**\n\n", group.title)
				title = true
			}
			fmt.Fprintf(out, "- %s %s %s\n", group.icon, mdCode(d.Code), mdEscape(d.Message))
		}
		if title {
			out.WriteString("\n")
		}
	}
}

// route is what a binding routes, without where to: a binding deleted
// while one with the same route is created only moves that route.
type route struct{ vhost, source, key string }

// reroutedBindings are the routes of the bindings the changes create.
func reroutedBindings(changes []plan.Change) map[route]bool {
	out := map[route]bool{}
	for _, c := range changes {
		if c.Action == plan.Create && c.After != nil && c.After.Binding != nil {
			out[route{c.Address.Vhost, c.After.Binding.Source, c.Address.Key}] = true
		}
	}
	return out
}

// routineDelete reports whether deleting c destroys nothing a reader must
// weigh, so that the summary leaves it out of the destructive changes:
// a binding whose route the plan re-creates to another destination (a
// retry binding moving to a new wait queue), or an empty wait queue
// without consumers that the spec no longer uses. The changes by queue
// still show it.
func routineDelete(c plan.Change, rerouted map[route]bool) bool {
	if c.Action != plan.Delete || c.Before == nil {
		return false
	}
	switch {
	case c.Before.Binding != nil:
		return rerouted[route{c.Address.Vhost, c.Before.Binding.Source, c.Address.Key}]
	case c.Before.Queue != nil:
		m, n := c.Messages(), c.Consumers()
		return contract.IsWaitQueue(c.Address.Name) && m != nil && *m == 0 && n != nil && *n == 0
	}
	return false
}

// mdReasons is a change's reason and the messages it puts at stake.
func mdReasons(c plan.Change) string {
	var reasons []string
	if c.Reason() != "" {
		reasons = append(reasons, c.Reason())
	}
	if stake := planMessagesAtStake(c); stake != "" {
		reasons = append(reasons, stake)
	}
	if c.Owner() != "" {
		reasons = append(reasons, "owned by "+c.Owner())
	}
	return strings.Join(reasons, "; ")
}

// markdownFooterRoom is kept free for the note on left-out changes.
const markdownFooterRoom = 600

// writeMarkdownGroups appends one <details> block per group while the
// whole stays within limit characters, then says what it left out.
func writeMarkdownGroups(out *strings.Builder, groups []planGroup, total, limit int, seeAll string) {
	vhosts := map[string]bool{}
	for _, g := range groups {
		vhosts[g.Vhost] = true
	}
	out.WriteString("**Changes by queue**\n\n")
	size := utf8.RuneCountInString(out.String())
	shown, shownChanges := 0, 0
	for _, g := range groups {
		block := markdownGroup(g, len(vhosts) > 1)
		n := utf8.RuneCountInString(block)
		if size+n+markdownFooterRoom > limit {
			break
		}
		out.WriteString(block)
		size += n
		shown++
		shownChanges += len(g.Changes)
	}
	if shown == len(groups) {
		return
	}
	left := groups[shown:]
	fmt.Fprintf(out, "**%d of %d changes are not shown here**, in %d %s from %s to %s, to keep this comment within %d characters.",
		total-shownChanges, total, len(left), english.Plural(len(left), "group", "groups"),
		mdCode(groupTitle(left[0])), mdCode(groupTitle(left[len(left)-1])), limit)
	if seeAll != "" {
		out.WriteString(" " + seeAll)
	}
	out.WriteString("\n")
}

func groupTitle(g planGroup) string {
	if g.Queue == "" {
		return "shared"
	}
	return g.Queue
}

// markdownGroup renders one group: a <details> block whose summary names
// the queue and counts its changes, around its part of the text plan.
// GitHub renders no Markdown inside <summary>, hence the HTML.
func markdownGroup(g planGroup, showVhost bool) string {
	var counts plan.ActionCounts
	destroys := false
	for _, c := range g.Changes {
		switch c.Action {
		case plan.Create:
			counts.Create++
		case plan.Update:
			counts.Update++
		case plan.Replace:
			counts.Replace++
			destroys = true
		case plan.Delete:
			counts.Delete++
			destroys = true
		case plan.Migrate:
			counts.Migrate++
		}
	}
	var parts []string
	for _, n := range []struct {
		count int
		verb  string
	}{{counts.Create, "create"}, {counts.Update, "update"}, {counts.Replace, "replace"}, {counts.Delete, "delete"}, {counts.Migrate, "migrate"}} {
		if n.count > 0 {
			parts = append(parts, fmt.Sprintf("%d to %s", n.count, n.verb))
		}
	}
	title := "shared objects"
	if g.Queue != "" {
		title = "queue <code>" + html.EscapeString(g.Queue) + "</code>"
	}
	if showVhost {
		title += " in vhost <code>" + html.EscapeString(g.Vhost) + "</code>"
	}
	var text strings.Builder
	pw := &planWriter{w: &text}
	for i := range g.Changes {
		if i > 0 {
			pw.printf("\n")
		}
		writePlanChange(pw, g.Changes[i], planLayout{})
	}
	open := ""
	if destroys {
		open = " open"
	}
	fence := mdFence(text.String())
	return fmt.Sprintf("<details%s>\n<summary>%s: %s</summary>\n\n%sdiff\n%s%s\n\n</details>\n\n",
		open, title, strings.Join(parts, ", "), fence, text.String(), fence)
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
	case plan.Migrate:
		return "🚚 migrate"
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
