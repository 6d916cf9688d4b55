package render

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

// planDocument is the JSON form of a plan (see docs/plan-json.md) and the
// only thing the text and Markdown renderers read, so that what a person
// sees and what a tool parses can never disagree.
type planDocument struct {
	FormatVersion int               `json:"format_version"`
	Changes       []plan.Change     `json:"changes"`
	Diagnostics   []plan.Diagnostic `json:"diagnostics"`
	Summary       plan.ActionCounts `json:"summary"`
}

func newPlanDocument(p plan.Plan, diags []plan.Diagnostic) planDocument {
	doc := planDocument{
		FormatVersion: plan.FormatVersion,
		Changes:       []plan.Change{},
		Diagnostics:   []plan.Diagnostic{},
		Summary:       p.CountActions(),
	}
	// No-ops only count: they are the unchanged part of the broker, and
	// anything worth knowing about one (a draining wait queue) is a
	// diagnostic.
	n := 0
	for _, c := range p.Changes {
		if c.Action != plan.NoOp {
			n++
		}
	}
	switch {
	case n == len(p.Changes) && n > 0:
		doc.Changes = p.Changes // nothing to leave out: no copy of a large plan
	case n > 0:
		doc.Changes = make([]plan.Change, 0, n)
		for _, c := range p.Changes {
			if c.Action != plan.NoOp {
				doc.Changes = append(doc.Changes, c)
			}
		}
	}
	doc.Diagnostics = append(doc.Diagnostics, diags...)
	return doc
}

func (d planDocument) hasChanges() bool { return len(d.Changes) > 0 }

// PlanJSON writes the plan, its diagnostics and its summary as versioned
// JSON for tools; docs/plan-json.md describes the format.
func PlanJSON(w io.Writer, p plan.Plan, diags []plan.Diagnostic) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	// Names and reasons are shown verbatim: "->" and "→" stay readable.
	enc.SetEscapeHTML(false)
	return enc.Encode(newPlanDocument(p, diags))
}

// PlanText writes the plan the way Terraform shows one: a symbol and the
// address per change, its planAttributes with what changes marked, the reason
// and the messages at stake as comments, then the diagnostics and a summary
// line. color adds ANSI colours for a terminal.
func PlanText(w io.Writer, p plan.Plan, diags []plan.Diagnostic, color bool) error {
	return writePlanText(w, newPlanDocument(p, diags), planLayout{planPalette: planPalette{on: color}, gutter: true})
}

// planLayout varies the text plan between a terminal and a Markdown diff
// block.
type planLayout struct {
	planPalette planPalette
	// gutter right-aligns the change symbols so addresses line up; without
	// it symbols start the line, which a ```diff block colours.
	gutter bool
}

func writePlanText(w io.Writer, doc planDocument, l planLayout) (err error) {
	// One write per line would be one system call per line on a terminal
	// or pipe: millions for a large plan.
	bw := bufio.NewWriterSize(w, 64<<10)
	pw := &planWriter{w: bw}
	defer func() {
		if ferr := bw.Flush(); ferr != nil && err == nil {
			err = ferr
		}
	}()
	st := l.planPalette
	if doc.hasChanges() {
		pw.printf("rmqtopo will perform the following actions:\n")
		for _, c := range doc.Changes {
			pw.printf("\n")
			writePlanChange(pw, c, l)
		}
		pw.printf("\n")
	}
	if len(doc.Diagnostics) > 0 {
		for _, d := range doc.Diagnostics {
			pw.printf("%s %s\n", st.severity(d.Severity, fmt.Sprintf("%s[%s]:", d.Severity, d.Code)), d.Message)
		}
		pw.printf("\n")
	}
	if doc.hasChanges() {
		s := doc.Summary
		pw.printf("%s %d to create, %d to update, %d to replace, %d to delete%s.\n",
			st.bold("Plan:"), s.Create, s.Update, s.Replace, s.Delete, migrateSummary(s))
	} else {
		pw.printf("%s The broker matches the spec.\n", st.bold("No changes."))
	}
	return pw.err
}

func planSymbol(a plan.Action) string {
	switch a {
	case plan.Create:
		return "+"
	case plan.Update:
		return "~"
	case plan.Replace:
		return "-/+"
	case plan.Delete:
		return "-"
	case plan.Migrate:
		return ">/+"
	}
	return " "
}

func writePlanChange(pw *planWriter, c plan.Change, l planLayout) {
	st := l.planPalette
	sym := planSymbol(c.Action)
	if c.MayDelete {
		sym = "?"
	}
	colored := st.symbol(sym)
	if l.gutter {
		colored = strings.Repeat(" ", 3-len(sym)) + colored
	}
	pw.printf("%s %s\n", colored, c.Address)

	// Attributes and comments are indented past the widest symbol, with
	// room for a marker of their own.
	const indent = "      "
	if c.Reason != "" {
		for _, r := range strings.Split(c.Reason, "; ") {
			pw.printf("%s  # (%s)\n", indent, r)
		}
	}
	if c.MayDelete {
		pw.printf("%s  # ? may delete: %s\n", indent, c.Owner)
	} else if c.Owner != "" {
		pw.printf("%s  # owned: %s\n", indent, c.Owner)
	}
	if len(c.Conflict) > 0 {
		pw.printf("%s  # conflict: also declared, with other attributes, by spec %s\n", indent, strings.Join(c.Conflict, ", "))
	}
	if stake := planMessagesAtStake(c); stake != "" {
		pw.printf("%s  # %s\n", indent, stake)
	}
	for _, line := range planAttributeLines(c) {
		marker := " "
		if line.marker != "" {
			marker = st.symbol(line.marker)
		}
		pw.printf("%s%s %s\n", indent, marker, line.text)
	}
}

func planMessagesAtStake(c plan.Change) string {
	if c.Action == plan.Migrate {
		return migrationMoves(c)
	}
	if c.Address.Kind != topology.KindQueue || (c.Action != plan.Replace && c.Action != plan.Delete) {
		return ""
	}
	switch {
	case c.Messages == nil:
		return "message count unknown"
	case *c.Messages == 0:
		return "no messages at stake"
	case *c.Messages == 1:
		return "1 message at stake"
	}
	return fmt.Sprintf("%d messages at stake", *c.Messages)
}

// planAttribute is one shown property of an object; set is false when the
// object does not have it (an absent argument, a false flag that is not
// worth a line).
type planAttribute struct {
	key, value string
	set        bool
}

type planAttributeLine struct {
	marker string // "", "+", "-" or "~"
	text   string
}

// planAttributeLines lists a change's planAttributes: the new object's for a
// create, both sides compared for an update or replace. A delete shows none:
// what goes away is named by the address, and JSON carries the object.
// Bindings show none either: their address is all there is to them.
func planAttributeLines(c plan.Change) []planAttributeLine {
	if c.Address.Kind == topology.KindBinding || c.Address.Kind == topology.KindVhost {
		return nil
	}
	var before, after []planAttribute
	if c.Before != nil {
		before = planAttributes(*c.Before)
	}
	if c.After != nil {
		after = planAttributes(*c.After)
	}
	var lines []planAttributeLine
	switch c.Action {
	case plan.Create:
		width := planKeyWidth(after, nil)
		for _, a := range after {
			if a.set {
				lines = append(lines, planAttributeLine{text: planPad(a.key, width) + " = " + a.value})
			}
		}
	case plan.Update, plan.Replace, plan.Migrate:
		width := planKeyWidth(before, after)
		for _, k := range planMergeKeys(before, after) {
			b, a := planFind(before, k), planFind(after, k)
			switch {
			case b.set && a.set && b.value == a.value:
				lines = append(lines, planAttributeLine{text: planPad(k, width) + " = " + a.value})
			case b.set && a.set:
				lines = append(lines, planAttributeLine{marker: "~", text: planPad(k, width) + " = " + b.value + " → " + a.value})
			case a.set:
				lines = append(lines, planAttributeLine{marker: "+", text: planPad(k, width) + " = " + a.value})
			case b.set:
				lines = append(lines, planAttributeLine{marker: "-", text: planPad(k, width) + " = " + b.value})
			}
		}
	}
	return lines
}

func planAttributes(o plan.Object) []planAttribute {
	value := func(v any) string { return plan.FormatValue(v, true) }
	switch {
	case o.Exchange != nil:
		e := o.Exchange
		return append([]planAttribute{
			{"type", value(e.Type), true},
			// Durability is shown even when false: a transient exchange is
			// rarely meant.
			{"durable", value(e.Durable), true},
			{"auto_delete", value(e.AutoDelete), e.AutoDelete},
			{"internal", value(e.Internal), e.Internal},
		}, planArgAttributes("arguments.", e.Arguments)...)
	case o.Queue != nil:
		q := o.Queue
		return append([]planAttribute{
			{"durable", value(q.Durable), true},
			{"auto_delete", value(q.AutoDelete), q.AutoDelete},
		}, planArgAttributes("arguments.", q.Arguments)...)
	case o.Policy != nil:
		p := o.Policy
		return append([]planAttribute{
			{"pattern", value(p.Pattern), true},
			{"apply_to", value(p.ApplyTo), true},
			{"priority", value(p.Priority), p.Priority != 0},
		}, planArgAttributes("definition.", p.Definition)...)
	}
	return nil
}

func planArgAttributes(prefix string, args topology.Args) []planAttribute {
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]planAttribute, len(keys))
	for i, k := range keys {
		out[i] = planAttribute{prefix + k, plan.FormatValue(args[k], true), true}
	}
	return out
}

// planMergeKeys lists the keys of both sides in display order: the fixed
// properties first, as planAttributes lists them, then arguments by name.
func planMergeKeys(before, after []planAttribute) []string {
	var fixed, args []string
	seen := map[string]bool{}
	for _, a := range append(append([]planAttribute(nil), after...), before...) {
		if seen[a.key] {
			continue
		}
		seen[a.key] = true
		if strings.Contains(a.key, ".") {
			args = append(args, a.key)
		} else {
			fixed = append(fixed, a.key)
		}
	}
	sort.Strings(args)
	return append(fixed, args...)
}

func planFind(attrs []planAttribute, key string) planAttribute {
	for _, a := range attrs {
		if a.key == key {
			return a
		}
	}
	return planAttribute{key: key}
}

func planKeyWidth(lists ...[]planAttribute) int {
	width := 0
	for _, l := range lists {
		for _, a := range l {
			if a.set {
				width = max(width, utf8.RuneCountInString(a.key))
			}
		}
	}
	return width
}

func planPad(s string, width int) string {
	return s + strings.Repeat(" ", max(0, width-utf8.RuneCountInString(s)))
}

// planPalette colours plan text for a terminal, and is the identity when off.
type planPalette struct{ on bool }

func (p planPalette) wrap(code, text string) string {
	if !p.on || text == "" {
		return text
	}
	return "\x1b[" + code + "m" + text + "\x1b[0m"
}

func (p planPalette) bold(t string) string { return p.wrap("1", t) }

func (p planPalette) symbol(sym string) string {
	switch sym {
	case "+":
		return p.wrap("32", sym)
	case "~":
		return p.wrap("33", sym)
	case "-":
		return p.wrap("31", sym)
	case "-/+":
		return p.wrap("31", "-") + "/" + p.wrap("32", "+")
	case ">/+":
		return p.wrap("36", ">") + "/" + p.wrap("32", "+")
	}
	return sym
}

func (p planPalette) severity(s plan.Severity, text string) string {
	switch s {
	case plan.SeverityError:
		return p.wrap("1;31", text)
	case plan.SeverityWarning:
		return p.wrap("1;33", text)
	}
	return p.wrap("1;36", text)
}

// planWriter keeps the first write error so rendering code stays linear.
type planWriter struct {
	w   io.Writer
	err error
}

func (e *planWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}
