package render

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/plan/planjson"
	"github.com/rmqtopo/rmqtopo/topology"
)

// PlanJSON writes the plan, its diagnostics and its summary as versioned
// JSON for tools: planjson.Document, which docs/plan-json.md describes,
// streamed a change at a time (planjson.Write).
func PlanJSON(w io.Writer, p plan.Plan, diags []plan.Diagnostic) error {
	return planjson.Write(w, planjson.NewDocument(p, diags))
}

// PlanText writes the plan the way Terraform shows one: a symbol and the
// address per change, its planAttributes with what changes marked, the reason
// and the messages at stake as comments, then the diagnostics and a summary
// line. o holds what only the caller knows.
func PlanText(w io.Writer, p plan.Plan, diags []plan.Diagnostic, o TextOptions) error {
	l := planLayout{planPalette: planPalette{on: o.Color}, gutter: true, versionFlag: o.VersionFlag}
	return writePlanText(w, planjson.NewDocument(p, diags), l)
}

// TextOptions is what only the text plan's caller knows.
type TextOptions struct {
	// Color adds ANSI colours for a terminal.
	Color bool
	// VersionFlag is the caller's override of the RabbitMQ version a plan
	// is judged for (the CLI's --rabbitmq-version flag), which the
	// plan's header names; empty: a caller without one.
	VersionFlag string
}

// planLayout varies the text plan between a terminal and a Markdown diff
// block.
type planLayout struct {
	planPalette planPalette
	// gutter right-aligns the change symbols so addresses line up; without
	// it symbols start the line, which a ```diff block colours.
	gutter bool
	// versionFlag words the header (TextOptions.VersionFlag).
	versionFlag string
}

func writePlanText(w io.Writer, doc planjson.Document, l planLayout) (err error) {
	// Buffered: one write per line would be one system call per line on
	// a terminal or pipe.
	bw := bufio.NewWriterSize(w, 64<<10)
	pw := &planWriter{w: bw}
	defer func() {
		if ferr := bw.Flush(); ferr != nil && err == nil {
			err = ferr
		}
	}()
	st := l.planPalette
	if doc.RabbitMQ != nil {
		pw.str(judgedLine(*doc.RabbitMQ, l.versionFlag) + ".\n\n")
	}
	if doc.HasChanges() {
		pw.str("rmqtopo will perform the following actions:\n")
		for i := range doc.Changes {
			pw.str("\n")
			writePlanChange(pw, &doc.Changes[i], l)
		}
		pw.str("\n")
	}
	if len(doc.Diagnostics) > 0 {
		for _, d := range doc.Diagnostics {
			pw.printf("%s %s\n", st.severity(d.Severity, fmt.Sprintf("%s[%s]:", d.Severity, d.Code)), d.Message)
		}
		pw.printf("\n")
	}
	if doc.HasChanges() {
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

// writePlanChange writes one change. It is written piece by piece rather
// than formatted: every change of a plan comes here.
func writePlanChange(pw *planWriter, c *plan.Change, l planLayout) {
	st := l.planPalette
	sym := planSymbol(c.Action)
	if c.Why() == plan.WhyMayDelete {
		sym = "?"
	}
	if l.gutter {
		pw.str("   "[:3-len(sym)])
	}
	pw.str(st.symbol(sym), " ")
	pw.address(c.Address)
	pw.str("\n")

	// Attributes and comments are indented past the widest symbol, with
	// room for a marker of their own.
	const indent = "      "
	if c.Reason() != "" {
		for _, r := range strings.Split(c.Reason(), "; ") {
			pw.printf("%s  # (%s)\n", indent, r)
		}
	}
	if c.Why() == plan.WhyMayDelete {
		pw.printf("%s  # ? may delete: %s\n", indent, c.Owner())
	} else if c.Owner() != "" {
		pw.printf("%s  # owned: %s\n", indent, c.Owner())
	}
	if len(c.Conflict()) > 0 {
		pw.printf("%s  # conflict: also declared, with other attributes, by spec %s\n", indent, strings.Join(c.Conflict(), ", "))
	}
	if stake := planMessagesAtStake(*c); stake != "" {
		pw.printf("%s  # %s\n", indent, stake)
	}
	if c.Action == plan.Create && c.After != nil && c.Address.Kind != topology.KindBinding && c.Address.Kind != topology.KindVhost {
		writeCreated(pw, c.After, indent)
		return
	}
	for _, line := range planAttributeLines(c) {
		marker := " "
		if line.marker != "" {
			marker = st.symbol(line.marker)
		}
		pw.str(indent, marker, " ", line.key)
		pw.pad(line.width - utf8.RuneCountInString(line.key))
		pw.str(" = ", line.value, "\n")
	}
}

// fixedAttr is a property of an object that planAttributes lists before
// its arguments, with its value by kind ('s', 'b' or 'i').
type fixedAttr struct {
	key  string
	kind byte
	s    string
	b    bool
	i    int64
	set  bool
}

// writeCreated writes the attribute lines of a created object exactly as
// planAttributeLines makes them, without making them: nearly every change
// of a plan is a create, so its lines leave no garbage.
func writeCreated(pw *planWriter, o *plan.Object, indent string) {
	var fixed [4]fixedAttr
	var n int
	var prefix string
	var args topology.Args
	switch {
	case o.Exchange != nil:
		e := o.Exchange
		fixed = [4]fixedAttr{{key: "type", kind: 's', s: e.Type, set: true}, {key: "durable", kind: 'b', b: e.Durable, set: true},
			{key: "auto_delete", kind: 'b', b: e.AutoDelete, set: e.AutoDelete}, {key: "internal", kind: 'b', b: e.Internal, set: e.Internal}}
		n, prefix, args = 4, "arguments.", e.Arguments
	case o.Queue != nil:
		q := o.Queue
		fixed = [4]fixedAttr{{key: "durable", kind: 'b', b: q.Durable, set: true}, {key: "auto_delete", kind: 'b', b: q.AutoDelete, set: q.AutoDelete}}
		n, prefix, args = 2, "arguments.", q.Arguments
	case o.Policy != nil:
		p := o.Policy
		fixed = [4]fixedAttr{{key: "pattern", kind: 's', s: p.Pattern, set: true}, {key: "apply_to", kind: 's', s: p.ApplyTo, set: true},
			{key: "priority", kind: 'i', i: p.Priority, set: p.Priority != 0}}
		n, prefix, args = 3, "definition.", p.Definition
	default:
		return
	}
	width := 0
	for _, f := range fixed[:n] {
		if f.set {
			width = max(width, len(f.key))
		}
	}
	pw.keys = pw.keys[:0]
	for k := range args {
		pw.keys = append(pw.keys, k)
		width = max(width, len(prefix)+utf8.RuneCountInString(k))
	}
	slices.Sort(pw.keys)
	for _, f := range fixed[:n] {
		if !f.set {
			continue
		}
		pw.str(indent, "  ", f.key)
		pw.pad(width - len(f.key))
		pw.str(" = ")
		switch f.kind {
		case 's':
			pw.jsonString(f.s)
		case 'b':
			pw.str(strconv.FormatBool(f.b))
		case 'i':
			pw.int(f.i)
		}
		pw.str("\n")
	}
	for _, k := range pw.keys {
		pw.str(indent, "  ", prefix, k)
		pw.pad(width - len(prefix) - utf8.RuneCountInString(k))
		pw.str(" = ")
		pw.value(args[k])
		pw.str("\n")
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
	case c.Messages() == nil:
		return "message count unknown"
	case *c.Messages() == 0:
		return "no messages at stake"
	case *c.Messages() == 1:
		return "1 message at stake"
	}
	return fmt.Sprintf("%d messages at stake", *c.Messages())
}

// planAttribute is one shown property of an object; set is false when the
// object does not have it (an absent argument, a false flag that is not
// worth a line).
type planAttribute struct {
	key, value string
	set        bool
}

// planAttributeLine is "key = value", the key padded to width.
type planAttributeLine struct {
	marker string // "", "+", "-" or "~"
	key    string
	width  int
	value  string // "old → new" for a changed value
}

// planAttributeLines lists a change's planAttributes: the new object's for a
// create, both sides compared for an update or replace. A delete shows none:
// what goes away is named by the address, and JSON carries the object.
// Bindings show none either: their address is all there is to them.
func planAttributeLines(c *plan.Change) []planAttributeLine {
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
		lines = make([]planAttributeLine, 0, len(after))
		for _, a := range after {
			if a.set {
				lines = append(lines, planAttributeLine{key: a.key, width: width, value: a.value})
			}
		}
	case plan.Update, plan.Replace, plan.Migrate:
		width := planKeyWidth(before, after)
		for _, k := range planMergeKeys(before, after) {
			b, a := planFind(before, k), planFind(after, k)
			switch {
			case b.set && a.set && b.value == a.value:
				lines = append(lines, planAttributeLine{key: k, width: width, value: a.value})
			case b.set && a.set:
				lines = append(lines, planAttributeLine{marker: "~", key: k, width: width, value: b.value + " → " + a.value})
			case a.set:
				lines = append(lines, planAttributeLine{marker: "+", key: k, width: width, value: a.value})
			case b.set:
				lines = append(lines, planAttributeLine{marker: "-", key: k, width: width, value: b.value})
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
	keys := slices.Sorted(maps.Keys(args))
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

// planPalette colours plan text for a terminal, and is the identity when
// off.
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
	w interface {
		io.Writer
		io.StringWriter
	}
	err  error
	buf  []byte   // scratch for address and numbers
	keys []string // scratch for writeCreated
}

func (e *planWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

// str writes its arguments, one after the other.
func (e *planWriter) str(parts ...string) {
	for _, s := range parts {
		if e.err == nil {
			_, e.err = e.w.WriteString(s)
		}
	}
}

// pad writes n spaces (none if n is negative).
func (e *planWriter) pad(n int) {
	const spaces = "                                "
	for ; n > 0 && e.err == nil; n -= len(spaces) {
		_, e.err = e.w.WriteString(spaces[:min(n, len(spaces))])
	}
}

// jsonString writes s as plan.FormatValue shows it.
func (e *planWriter) jsonString(s string) {
	if topology.JSONPlain(s) {
		e.str(`"`, s, `"`)
		return
	}
	e.str(plan.FormatValue(s, true))
}

func (e *planWriter) int(i int64) {
	e.buf = strconv.AppendInt(e.buf[:0], i, 10)
	if e.err == nil {
		_, e.err = e.w.Write(e.buf)
	}
}

// value writes an argument's value as plan.FormatValue shows it.
func (e *planWriter) value(v any) {
	switch x := v.(type) {
	case string:
		e.jsonString(x)
	case int64:
		e.int(x)
	default:
		e.str(plan.FormatValue(v, true))
	}
}

func (e *planWriter) address(a topology.Address) {
	e.buf = a.Append(e.buf[:0])
	if e.err == nil {
		_, e.err = e.w.Write(e.buf)
	}
}
