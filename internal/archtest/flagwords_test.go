package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// flagName is a command-line flag in a string: "--prune", not "--" or
// "---".
var flagName = regexp.MustCompile(`(^|[^-])--[a-z][a-z-]*`)

// flagsAllowed are the production paths that may name flags: the CLI,
// the examples, the test broker, and the convergence corpus's format,
// whose flags file holds the CLI's flags.
var flagsAllowed = []string{"cmd/", "examples/", "internal/brokertest/", "internal/converge/"}

// flagsPending are files that still name flags, each to be changed by the
// work that owns it; a file leaves this list once it names none.
var flagsPending = map[string]bool{}

// TestFlagsOnlyInCmd: a library names no flag of the CLI in a string
// (its diagnostics and errors carry data; the CLI chooses the words), so
// the same library serves a caller with other flags, or none.
func TestFlagsOnlyInCmd(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, root+string(filepath.Separator)))
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || allowed(rel) {
			return nil
		}
		for _, lit := range flagStrings(t, path) {
			if flagsPending[rel] {
				seen[rel] = true
				continue
			}
			t.Errorf("%s names a flag: %s", rel, lit)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for f := range flagsPending {
		if !seen[f] {
			t.Errorf("%s names no flag any more: take it off flagsPending", f)
		}
	}
}

func allowed(rel string) bool {
	for _, p := range flagsAllowed {
		if strings.HasPrefix(rel, p) {
			return true
		}
	}
	return false
}

// flagStrings returns the string literals of a Go file that name a flag.
func flagStrings(t *testing.T, path string) []string {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	docs := docFields(path)
	ast.Inspect(f, func(n ast.Node) bool {
		if kv, ok := n.(*ast.KeyValueExpr); ok && docs {
			if k, ok := kv.Key.(*ast.Ident); ok && (k.Name == "Description" || k.Name == "Meaning") {
				return false
			}
		}
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		s, err := strconv.Unquote(lit.Value)
		if err == nil && flagName.MatchString(s) {
			out = append(out, lit.Value)
		}
		return true
	})
	return out
}

// docFields reports whether path holds the spec's field tables, whose
// Description and Meaning are the reference of the spec format (the JSON
// Schema and docs/spec.md are generated from them) and so may name the
// CLI's flags as the docs do; the file's other strings may not.
func docFields(path string) bool {
	return strings.HasPrefix(filepath.Base(path), "fields_") && filepath.Base(filepath.Dir(path)) == "spec"
}
