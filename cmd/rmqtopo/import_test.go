package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestOnlineImportRoundTrips applies every example to a vhost of a real
// broker, imports the vhost back, and plans the imported spec against the
// same broker: no changes. Then the imported spec imported again from the
// broker's export gives the same bytes.
func TestOnlineImportRoundTrips(t *testing.T) {
	t.Parallel()
	paths, _ := filepath.Glob("../../examples/*.yaml")
	presets, _ := filepath.Glob("../../examples/presets/*.yaml")
	header := regexp.MustCompile(`(?m)^(version|vhost):.*\n`)
	for _, path := range append(paths, presets...) {
		t.Run(filepath.Base(filepath.Dir(path))+"/"+filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			o := newOnline(t)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			example := o.spec(t, "example.yaml", header.ReplaceAllString(string(data), ""))
			o.must(t, 0, "apply", "--auto-approve", example)
			imported := filepath.Join(o.dir, "imported.yaml")
			_, stderr, code := rmqtopo(t, "", append([]string{"import", "--vhost", o.vhost, "-o", imported}, o.conn()...)...)
			if code != 0 || strings.Contains(stderr, "not imported:") {
				t.Fatalf("import: exit %d\n%s", code, stderr)
			}
			out := o.must(t, 0, "plan", "--detailed-exitcode", imported)
			if !strings.Contains(out, "No changes.") {
				t.Errorf("plan of the imported spec:\n%s", out)
			}
			first, _ := os.ReadFile(imported)
			// The header names the broker and the version /api/overview gave.
			if header := regexp.MustCompile(`^# Imported by rmqtopo import from the broker at http://[^ @]+ \(RabbitMQ \d+\.\d+\.\d+\), vhost "`); !header.Match(first) {
				t.Errorf("header:\n%s", first)
			}
			again, stderr, code := rmqtopo(t, "", append([]string{"import", "--vhost", o.vhost}, o.conn()...)...)
			if code != 0 || again != string(first) {
				t.Errorf("a second import differs (exit %d, %s):\n%s\nfirst:\n%s", code, stderr, again, first)
			}
		})
	}
}

// TestPlanRabbitMQVersion: --rabbitmq-version judges an offline plan; a
// queue 4.3 refuses (x-queue-version 1) stops the plan with its code, and
// 3.13 only notes that it ignores x-queue-mode.
func TestPlanRabbitMQVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(path, []byte("version: 1\nqueues:\n  - {name: old, raw: true, arguments: {x-queue-mode: lazy}}\n  - {name: v1, raw: true, arguments: {x-queue-version: 1}}\n  - {name: votes, raw: true, type: quorum}\n"), 0o644)
	stdout, stderr, code := rmqtopo(t, "", "plan", "--against", "empty", "--rabbitmq-version", "4.3.0", path)
	if code != 1 || !strings.Contains(stdout, "RT103") || !strings.Contains(stdout, "RT101") || !strings.Contains(stderr, "nothing was written") {
		t.Errorf("4.3: exit %d\n%s%s", code, stdout, stderr)
	}
	stdout, stderr, code = rmqtopo(t, "", "plan", "--against", "empty", "--rabbitmq-version", "3.13.7", path)
	if code != 0 || strings.Contains(stdout, "RT103") || strings.Contains(stdout, "RT101") || !strings.Contains(stdout, "info[RT105]") {
		t.Errorf("3.13: exit %d\n%s%s", code, stdout, stderr)
	}
}

// TestOnlineImportRabbitMQDefinitions imports vhosts of RabbitMQ's own
// definitions test files, applies each imported spec to a vhost of a real
// broker, and plans it again: no changes. Then a live import of that vhost
// gives the spec back.
func TestOnlineImportRabbitMQDefinitions(t *testing.T) {
	t.Parallel()
	cases := []struct{ file, vhost string }{
		{"case1.json", "/"}, {"case3.json", "/"}, {"case4.json", "/"}, {"case9b.json", "/"},
		{"case9b.json", "bunny_testbed"}, {"case14.json", "/"}, {"failing_case21.json", "/"},
	}
	vhostLine := regexp.MustCompile(`(?m)^vhost:.*$`)
	for _, c := range cases {
		t.Run(c.file+":"+c.vhost, func(t *testing.T) {
			t.Parallel()
			o := newOnline(t)
			src := filepath.Join("..", "..", "internal", "importer", "testdata", "rabbitmq", c.file)
			stdout, stderr, code := rmqtopo(t, "", "import", "--definitions", src, "--vhost", c.vhost)
			if code != 0 {
				t.Fatalf("import: exit %d\n%s", code, stderr)
			}
			spec := filepath.Join(o.dir, "imported.yaml")
			os.WriteFile(spec, []byte(vhostLine.ReplaceAllString(stdout, "vhost: "+quote(o.vhost))), 0o644)
			o.must(t, 0, "apply", "--auto-approve", spec)
			if out := o.must(t, 0, "plan", "--detailed-exitcode", spec); !strings.Contains(out, "No changes.") {
				t.Errorf("plan after apply:\n%s", out)
			}
			live, stderr, code := rmqtopo(t, "", append([]string{"import", "--vhost", o.vhost}, o.conn()...)...)
			if code != 0 {
				t.Fatalf("live import: exit %d\n%s", code, stderr)
			}
			if diff := cmp.Diff(body(stdout), body(live)); diff != "" {
				t.Errorf("live import differs from the file's (-want +got):\n%s", diff)
			}
		})
	}
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

// body is a spec without its header comment and vhost line.
func body(spec string) string {
	var out []string
	for _, l := range strings.Split(spec, "\n") {
		if l != "" && !strings.HasPrefix(l, "#") && !strings.HasPrefix(l, "vhost:") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
