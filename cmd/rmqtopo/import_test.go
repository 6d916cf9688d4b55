package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
			again, stderr, code := rmqtopo(t, "", append([]string{"import", "--vhost", o.vhost}, o.conn()...)...)
			if code != 0 || again != string(first) {
				t.Errorf("a second import differs (exit %d, %s):\n%s\nfirst:\n%s", code, stderr, again, first)
			}
		})
	}
}

// TestPlanRabbitMQVersion: --rabbitmq-version judges an offline plan; a
// queue 4.3 refuses stops the plan with its code, and 3.13 says nothing.
func TestPlanRabbitMQVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(path, []byte("version: 1\nqueues:\n  - {name: old, raw: true, arguments: {x-queue-mode: lazy}}\n  - {name: votes, raw: true, type: quorum}\n"), 0o644)
	stdout, stderr, code := rmqtopo(t, "", "plan", "--against", "empty", "--rabbitmq-version", "4.3.0", path)
	if code != 1 || !strings.Contains(stdout, "RT103") || !strings.Contains(stdout, "RT101") || !strings.Contains(stderr, "nothing was written") {
		t.Errorf("4.3: exit %d\n%s%s", code, stdout, stderr)
	}
	stdout, stderr, code = rmqtopo(t, "", "plan", "--against", "empty", "--rabbitmq-version", "3.13.7", path)
	if code != 0 || strings.Contains(stdout, "RT1") {
		t.Errorf("3.13: exit %d\n%s%s", code, stdout, stderr)
	}
}
