package spec

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// Error is one problem in a spec file, located precisely enough for an
// editor to jump to it.
type Error struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	Column int    `json:"column"`
	// Path is the dotted path of the offending value, e.g.
	// "queues[2].retry.delays[1]".
	Path    string `json:"path"`
	Message string `json:"message"`
}

func (e Error) Error() string {
	loc := fmt.Sprintf("%s:%d:%d", e.File, e.Line, e.Column)
	if e.Path != "" {
		return fmt.Sprintf("%s: %s: %s", loc, e.Path, e.Message)
	}
	return fmt.Sprintf("%s: %s", loc, e.Message)
}

// Errors is every problem found, reported together so that a user fixes a
// file in one pass.
type Errors []Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

func (es Errors) sorted() Errors {
	sort.SliceStable(es, func(i, j int) bool {
		a, b := es[i], es[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	return es
}

// pos is where a value was written.
type pos struct {
	line, col int
	path      string
}

// problems collects errors against one file.
type problems struct {
	file string
	errs Errors
}

func (p *problems) add(at pos, format string, args ...any) {
	line, col := at.line, at.col
	if line == 0 {
		line, col = 1, 1
	}
	for i, a := range args {
		if s, ok := a.(string); ok {
			args[i] = cut(s)
		}
	}
	p.errs = append(p.errs, Error{File: p.file, Line: line, Column: col, Path: cut(at.path), Message: fmt.Sprintf(format, args...)})
}

// cut bounds a string an error quotes, once it is longer than any name
// RabbitMQ accepts, to 100 bytes, on a UTF-8 boundary: a 20 MB name is not
// echoed back. The lists of keys some messages give are shorter.
func cut(s string) string {
	if len(s) <= 255 {
		return s
	}
	n := 100
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
