package archtest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestServiceModuleDeps builds a service's module, as a service imports the
// helper, and checks what its go.mod requires and what its build links:
// importing only retry brings no OpenTelemetry (retry/retryotel is apart
// for that) and none of the CLI's dependencies; importing retryotel brings
// OpenTelemetry, which shows the check can see it.
func TestServiceModuleDeps(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	onlyRetry := serviceModule(t, root, "github.com/rmqtopo/rmqtopo/retry")
	for _, m := range onlyRetry.requires {
		if m != "github.com/rmqtopo/rmqtopo" && m != "github.com/rabbitmq/amqp091-go" && m != "github.com/Azure/go-amqp" {
			t.Errorf("a service importing only retry requires %s", m)
		}
	}
	for _, p := range onlyRetry.deps {
		if strings.HasPrefix(p, "go.opentelemetry.io/") || strings.HasPrefix(p, "github.com/prometheus/") {
			t.Errorf("a service importing only retry links %s", p)
		}
	}
	withOtel := serviceModule(t, root, "github.com/rmqtopo/rmqtopo/retry/retryotel")
	if !hasPrefix(withOtel.requires, "go.opentelemetry.io/otel") || !hasPrefix(withOtel.deps, "go.opentelemetry.io/otel/trace") {
		t.Errorf("a service importing retryotel: requires %v, links no go.opentelemetry.io/otel/trace", withOtel.requires)
	}
}

// service is what a service module requires (go.mod after go mod tidy)
// and the packages its build links (go list -deps).
type service struct{ requires, deps []string }

// serviceModule writes a module whose main package imports pkg, with
// rmqtopo replaced by the checkout at root, tidies it and lists it.
func serviceModule(t *testing.T, root, pkg string) service {
	t.Helper()
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/service\n\ngo 1.25.0\n\nrequire github.com/rmqtopo/rmqtopo v0.0.0\n\nreplace github.com/rmqtopo/rmqtopo => "+root+"\n")
	write("main.go", "package main\n\nimport _ \""+pkg+"\"\n\nfunc main() {}\n")
	run := func(args ...string) string {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		// The module cache already holds every module: rmqtopo's build
		// needs them.
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.Output()
		if err != nil {
			if ee, ok := err.(*exec.ExitError); ok {
				t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, ee.Stderr)
			}
			t.Fatalf("go %s: %v", strings.Join(args, " "), err)
		}
		return string(out)
	}
	run("mod", "tidy")
	var s service
	// go.mod's requirements, not the module graph (go list -m all): that
	// holds every requirement of rmqtopo's one module, the CLI's too, but
	// a service's build and go.mod see only the modules of the packages
	// it imports (module graph pruning, Go 1.17).
	s.requires = requirements(t, run("mod", "edit", "-json"))
	s.deps = strings.Fields(run("list", "-deps", "."))
	return s
}

func hasPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// requirements returns the module paths go.mod (go mod edit -json)
// requires.
func requirements(t *testing.T, modJSON string) []string {
	t.Helper()
	var mod struct{ Require []struct{ Path string } }
	if err := json.Unmarshal([]byte(modJSON), &mod); err != nil {
		t.Fatalf("reading go mod edit -json: %v", err)
	}
	var out []string
	for _, r := range mod.Require {
		out = append(out, r.Path)
	}
	return out
}
