package spec

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// examplePaths are every example spec shipped with rmqtopo.
func examplePaths(t testing.TB) []string {
	t.Helper()
	var paths []string
	for _, glob := range []string{"../examples/*.yaml", "../examples/presets/*.yaml"} {
		m, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, m...)
	}
	if len(paths) < 8 {
		t.Fatalf("found only %d examples: %v", len(paths), paths)
	}
	return paths
}

// mustParse parses an inline spec that must be valid.
func mustParse(t testing.TB, name, src string) *File {
	t.Helper()
	f, err := Parse(name, []byte(src))
	if err != nil {
		t.Fatalf("Parse(%s):\n%v", name, err)
	}
	return f
}

// mustFail parses an inline spec that must be invalid and returns its
// errors.
func mustFail(t testing.TB, name, src string) Errors {
	t.Helper()
	f, err := Parse(name, []byte(src))
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("Parse(%s) = %v, %v; want Errors", name, f, err)
	}
	return es
}

func TestExamplesLoad(t *testing.T) {
	for _, path := range examplePaths(t) {
		t.Run(path, func(t *testing.T) {
			files, err := LoadFiles(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(files) != 1 || files[0].Path != path {
				t.Fatalf("LoadFiles(%s) = %d files", path, len(files))
			}
			if len(files[0].Spec.Queues) == 0 {
				t.Errorf("no queues")
			}
		})
	}
}

func TestLoadFilesReportsAllFilesAtOnce(t *testing.T) {
	dir := t.TempDir()
	bad1 := writeFile(t, dir, "b.yaml", "version: 1\nqueues:\n  - name: a\n    dlq: maybe\n")
	bad2 := writeFile(t, dir, "a.yaml", "version: 1\nvhost: other\nqueues:\n  - name: amq.x\n")
	missing := filepath.Join(dir, "missing.yaml")
	_, err := LoadFiles(bad1, missing, bad2)
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("LoadFiles error = %v, want Errors", err)
	}
	var got []string
	for _, e := range es {
		got = append(got, strings.TrimPrefix(e.Error(), dir+string(filepath.Separator)))
	}
	want := []string{
		`a.yaml:4:11: queues[0].name: queue name "amq.x" uses the prefix "amq.", which RabbitMQ reserves (declared at queues[0])`,
		`b.yaml:4:10: queues[0].dlq: expected true or false, got string "maybe"`,
		`missing.yaml:1:1: no such file`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestLoadFilesOneFilePerVhost(t *testing.T) {
	dir := t.TempDir()
	a := writeFile(t, dir, "a.yaml", "version: 1\nqueues:\n  - name: a\n")
	b := writeFile(t, dir, "b.yaml", "# same vhost\nversion: 1\nvhost: /\nqueues:\n  - name: b\n")
	c := writeFile(t, dir, "c.yaml", "version: 1\nvhost: other\nqueues:\n  - name: a\n")
	if _, err := LoadFiles(a, c); err != nil {
		t.Errorf("two vhosts, same queue names: %v", err)
	}
	_, err := LoadFiles(a, b)
	var es Errors
	if !errors.As(err, &es) || len(es) != 1 {
		t.Fatalf("LoadFiles(a, b) = %v, want one error", err)
	}
	if e := es[0]; e.File != b || e.Line != 2 || e.Column != 1 || !strings.Contains(e.Message, `vhost "/" is already described by `+a) {
		t.Errorf("error = %#v", e)
	}
}

func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
