package render_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/internal/definitions"
	"github.com/rmqtopo/rmqtopo/render"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

// The -update flag (go test ./render/ -update) rewrites golden files. It is
// shared with the plan rendering tests; it is registered here only if they
// have not already, and init runs after every package-level flag.Bool.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files in testdata")
	}
}

func updatingGoldens() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// renderExamplePaths are every example spec, relative to the repository root.
func renderExamplePaths(t *testing.T) []string {
	t.Helper()
	var paths []string
	for _, glob := range []string{"examples/*.yaml", "examples/presets/*.yaml", "examples/rabbitmq-4.3/*.yaml"} {
		m, err := filepath.Glob(filepath.Join("..", glob))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range m {
			paths = append(paths, filepath.ToSlash(strings.TrimPrefix(p, ".."+string(filepath.Separator))))
		}
	}
	if len(paths) < 8 {
		t.Fatalf("found only %d examples", len(paths))
	}
	return paths
}

// exampleGoldenPath names the golden file of one example and format:
// examples/presets/outbox.yaml → testdata/golden/examples__presets__outbox.schedule.
func exampleGoldenPath(example, format string) string {
	base := strings.ReplaceAll(strings.TrimSuffix(example, ".yaml"), "/", "__")
	return filepath.Join("testdata", "golden", base+"."+format)
}

var exampleFormats = []struct {
	name   string
	render func(*bytes.Buffer, []*spec.File) error
}{
	{"definitions", func(w *bytes.Buffer, fs []*spec.File) error { return render.Definitions(w, spec.Expand(fs...)) }},
	{"mermaid", func(w *bytes.Buffer, fs []*spec.File) error { return render.Mermaid(w, spec.Expand(fs...)) }},
	{"dot", func(w *bytes.Buffer, fs []*spec.File) error { return render.Dot(w, spec.Expand(fs...)) }},
	{"schedule", func(w *bytes.Buffer, fs []*spec.File) error { return render.Schedule(w, fs, false) }},
	{"k8s", func(w *bytes.Buffer, fs []*spec.File) error {
		return render.Kubernetes(w, spec.Expand(fs...), render.K8sOptions{Cluster: "rabbitmq"})
	}},
	{"terraform", func(w *bytes.Buffer, fs []*spec.File) error { return render.Terraform(w, spec.Expand(fs...)) }},
}

// TestExampleGoldens renders every example in every format and compares
// with testdata/golden.
func TestExampleGoldens(t *testing.T) {
	seen := map[string]bool{}
	for _, example := range renderExamplePaths(t) {
		files, err := spec.LoadFiles(filepath.Join("..", example))
		if err != nil {
			t.Fatalf("%s: %v", example, err)
		}
		for _, format := range exampleFormats {
			path := exampleGoldenPath(example, format.name)
			seen[filepath.Base(path)] = true
			t.Run(example+"/"+format.name, func(t *testing.T) {
				var buf bytes.Buffer
				if err := format.render(&buf, files); err != nil {
					t.Fatal(err)
				}
				assertGolden(t, path, buf.Bytes())
			})
		}
	}
	// A golden file of an example that no longer exists is stale.
	all, _ := filepath.Glob(filepath.Join("testdata", "golden", "*"))
	for _, p := range all {
		if !seen[filepath.Base(p)] {
			if updatingGoldens() {
				os.Remove(p)
				continue
			}
			t.Errorf("stale golden file %s: no example renders it (go test -update removes it)", p)
		}
	}
}

func TestOutboxScheduleTimeline(t *testing.T) {
	files, err := spec.LoadFiles("../examples/outbox.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := render.Schedule(&buf, files, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 7 || !strings.HasPrefix(lines[1], "  retries travel: ") {
		t.Fatalf("want a title, how retries travel, a header and 4 attempts, got:\n%s", buf.String())
	}
	var at []string
	for _, l := range lines[3:] {
		at = append(at, strings.Fields(l)[2])
	}
	if diff := cmp.Diff([]string{"0s", "2s", "7s", "22s"}, at); diff != "" {
		t.Errorf("AT column (-want +got):\n%s\n%s", diff, buf.String())
	}
	if last := lines[len(lines)-1]; !strings.HasSuffix(last, "DLQ demo.order_processor.dlq") {
		t.Errorf("last attempt does not end in the DLQ: %q", last)
	}
}

func TestScheduleColor(t *testing.T) {
	files, err := spec.LoadFiles("../examples/outbox.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var plain, color bytes.Buffer
	if err := render.Schedule(&plain, files, false); err != nil {
		t.Fatal(err)
	}
	if err := render.Schedule(&color, files, true); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(plain.Bytes(), []byte("\x1b[")) {
		t.Errorf("colour off, but output has escape sequences:\n%q", plain.String())
	}
	for _, want := range []string{"\x1b[1mqueue demo.order_processor\x1b[0m", "\x1b[31mDLQ demo.order_processor.dlq\x1b[0m"} {
		if !strings.Contains(color.String(), want) {
			t.Errorf("colour on, want %q in:\n%q", want, color.String())
		}
	}
	stripped := strings.NewReplacer("\x1b[1m", "", "\x1b[31m", "", "\x1b[0m", "").Replace(color.String())
	if stripped != plain.String() {
		t.Errorf("colour changes more than escapes:\n%s\nvs\n%s", stripped, plain.String())
	}
}

// TestDefinitionsRoundTrip reads the definitions JSON back the way a
// broker export is read and wants the topology it was rendered from.
func TestDefinitionsRoundTrip(t *testing.T) {
	inline := filepath.Join(t.TempDir(), "args.yaml")
	if err := os.WriteFile(inline, []byte(`version: 1
vhost: billing
exchanges:
  - name: in
    type: headers
    durable: false
    auto_delete: true
    internal: true
    arguments: {alternate-exchange: lost, x-ratio: 1.5, x-whole: 2.0, x-list: [1, a, true], x-table: {k: v}}
    bindings: [{exchange: amq.topic, routing_key: "#"}]
  - {name: lost, type: fanout}
queues:
  - name: q
    type: quorum
    message_ttl: 1m
    max_length: 5
    bindings: [{exchange: in, arguments: {x-match: any, a: "1", b: 2}}]
    retry: {exponential: {initial: 100ms, factor: 1.5, attempts: 3}}
policies:
  - {name: p, pattern: "^q$", apply_to: quorum_queues, priority: -3, definition: {max-length: 9, overflow: reject-publish}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	paths := []string{inline}
	for _, p := range renderExamplePaths(t) {
		paths = append(paths, filepath.Join("..", p))
	}
	for _, path := range paths {
		t.Run(strings.TrimPrefix(filepath.ToSlash(path), "../"), func(t *testing.T) {
			files, err := spec.LoadFiles(path)
			if err != nil {
				t.Fatal(err)
			}
			want := spec.Expand(files...)
			var buf bytes.Buffer
			if err := render.Definitions(&buf, want); err != nil {
				t.Fatal(err)
			}
			doc, err := definitions.Decode(buf.Bytes(), "")
			if err != nil {
				t.Fatal(err)
			}
			got := doc.ToTopology()
			if path == inline {
				// Bindings from amq.* are the broker's; reading back drops them.
				want = dropBrokerOwned(want)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("definitions round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func dropBrokerOwned(t topology.Topology) topology.Topology {
	var bs []topology.Binding
	for _, b := range t.Bindings {
		if !strings.HasPrefix(b.Source, "amq.") {
			bs = append(bs, b)
		}
	}
	t.Bindings = bs
	return t
}

// assertGolden compares got with the golden file at path, or rewrites it
// under -update. On a mismatch it shows a line diff.
func assertGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if updatingGoldens() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./render/ -update to create it, then review it)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs from the output (go test ./render/ -update rewrites it):\n%s", path, lineDiff(string(want), string(got)))
	}
}

// lineDiff is a small unified-style diff of two texts: lines only in want
// are "-", only in got "+", with two lines of context around changes.
func lineDiff(want, got string) string {
	a, b := splitLines(want), splitLines(got)
	// lcs[i][j] is the length of the longest common subsequence of a[i:]
	// and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type line struct {
		op   byte
		text string
	}
	var ops []line
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			ops = append(ops, line{' ', a[i]})
			i++
			j++
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, line{'-', a[i]})
			i++
		default:
			ops = append(ops, line{'+', b[j]})
			j++
		}
	}
	const context = 2
	var out strings.Builder
	last := -1
	for k, l := range ops {
		near := false
		for d := -context; d <= context; d++ {
			if k+d >= 0 && k+d < len(ops) && ops[k+d].op != ' ' {
				near = true
				break
			}
		}
		if !near {
			continue
		}
		if last >= 0 && k != last+1 {
			out.WriteString("@@\n")
		}
		last = k
		text := strings.TrimSuffix(l.text, "\n")
		if !strings.HasSuffix(l.text, "\n") && l.op != ' ' {
			text += " (no newline at end)"
		}
		fmt.Fprintf(&out, "%c %s\n", l.op, text)
	}
	return out.String()
}

func splitLines(s string) []string {
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

func TestLineDiff(t *testing.T) {
	got := lineDiff("a\nb\nc\nd\ne\nf\ng\n", "a\nb\nc\nD\ne\nf\ng\nh\n")
	want := "  b\n  c\n- d\n+ D\n  e\n  f\n  g\n+ h\n"
	if got != want {
		t.Errorf("lineDiff:\n%s\nwant:\n%s", got, want)
	}
	got = lineDiff("1\n2\n3\n4\n5\n6\n7\n8\n9\n", "x\n2\n3\n4\n5\n6\n7\n8\n9")
	want = "- 1\n+ x\n  2\n  3\n@@\n  7\n  8\n- 9\n+ 9 (no newline at end)\n"
	if got != want {
		t.Errorf("lineDiff:\n%s\nwant:\n%s", got, want)
	}
}
