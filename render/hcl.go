package render

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// hclItem is one line-level element of an HCL body: a block, an attribute
// (or object item) whose value fits on one line, one whose value is an
// object spread over several lines, or a blank line.
type hclItem struct {
	block string // a block's header, such as `settings`; its body is items
	key   string // an attribute's name or an object item's quoted key
	expr  string // a one-line value
	// open and close surround a multi-line value's items: "{" and "}", or
	// "jsonencode({" and "})".
	open, close string
	items       []hclItem
	blank       bool
}

func (it hclItem) oneLine() bool { return it.block == "" && !it.blank && it.open == "" }

// writeHCL writes items at the given indent the way `terraform fmt` does:
// two spaces a level, and the "=" of consecutive one-line attributes aligned
// one space after the longest name (counted in characters, as terraform fmt
// counts them). A blank line, a block or a multi-line
// value ends such a run, and the line opening a multi-line value is not
// aligned with its neighbours.
func writeHCL(b *strings.Builder, items []hclItem, indent int) {
	pad := strings.Repeat("  ", indent)
	for i := 0; i < len(items); i++ {
		it := items[i]
		switch {
		case it.blank:
			b.WriteString("\n")
		case it.block != "":
			fmt.Fprintf(b, "%s%s {\n", pad, it.block)
			writeHCL(b, it.items, indent+1)
			fmt.Fprintf(b, "%s}\n", pad)
		case it.open != "":
			fmt.Fprintf(b, "%s%s = %s\n", pad, it.key, it.open)
			writeHCL(b, it.items, indent+1)
			fmt.Fprintf(b, "%s%s\n", pad, it.close)
		default:
			j := i
			width := 0
			for ; j < len(items) && items[j].oneLine(); j++ {
				width = max(width, utf8.RuneCountInString(items[j].key))
			}
			for _, run := range items[i:j] {
				fmt.Fprintf(b, "%s%-*s = %s\n", pad, width, run.key, run.expr)
			}
			i = j - 1
		}
	}
}

// hclValue is `key = v`: a multi-line object for a non-empty map, one line
// otherwise. Map keys are always quoted: argument names have dashes.
func hclValue(key string, v any) hclItem {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return hclItem{key: key, expr: hclInline(v)}
	}
	it := hclItem{key: key, open: "{", close: "}"}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		it.items = append(it.items, hclValue(hclString(k), m[k]))
	}
	return it
}

// hclInline renders a value on one line. Tables inside lists are written
// `{ "k" = v, ... }`, which terraform fmt leaves as they are.
func hclInline(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return hclString(x)
	case bool:
		return strconv.FormatBool(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return hclString(fmt.Sprint(x))
		}
		return strconv.FormatFloat(x, 'f', -1, 64)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = hclInline(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		if len(x) == 0 {
			return "{}"
		}
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(x)) {
			parts = append(parts, hclString(k)+" = "+hclInline(x[k]))
		}
		return "{ " + strings.Join(parts, ", ") + " }"
	}
	return hclString(fmt.Sprint(v))
}

// hclString quotes s as an HCL string literal; "${" and "%{" are escaped
// so that Terraform reads them as text, not as template sequences.
func hclString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case (r == '$' || r == '%') && strings.HasPrefix(s[i+1:], "{"):
			b.WriteRune(r)
			b.WriteRune(r)
		case !unicode.IsPrint(r) && r > 0xFFFF:
			fmt.Fprintf(&b, `\U%08X`, r)
		case !unicode.IsPrint(r):
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
