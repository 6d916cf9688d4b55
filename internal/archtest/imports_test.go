package archtest

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/rmqtopo/rmqtopo/"

// deps lists the packages pkg depends on, directly or not.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", module+pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

func TestLayering(t *testing.T) {
	rules := []struct {
		pkg       string
		forbidden []string
	}{
		// plan is pure: no broker, no files, no specs.
		{"plan", []string{"net", "net/http", "os/exec", module + "internal/broker", module + "spec", module + "internal/definitions"}},
		// The live source never reaches back up into plan.
		{"internal/broker", []string{module + "plan", module + "spec", module + "apply"}},
		// ops moves and shows messages; it knows no spec and no plan.
		{"ops", []string{module + "spec", module + "plan"}},
		// Rendering never talks to a broker, and draws plans and
		// topologies only: a feature room (status, ops) draws its own views,
		// so render stays below it.
		{"render", []string{module + "internal/broker", "net/http", module + "status", module + "ops"}},
		// status reads and reports; it never writes, and no lower room
		// reaches up into it (the rules above and below).
		{"status", []string{module + "apply", module + "ops"}},
		// The upgrade preview judges and renders without the broker.
		{"internal/upgrade", []string{module + "internal/broker", "net", "net/http"}},
		// apply executes plans; it never re-diffs against a spec.
		{"apply", []string{module + "spec", module + "internal/broker"}},
	}
	for _, r := range rules {
		got := map[string]bool{}
		for _, d := range deps(t, r.pkg) {
			got[d] = true
		}
		for _, f := range r.forbidden {
			if got[f] {
				t.Errorf("%s depends on %s", r.pkg, f)
			}
		}
	}
}

// TestRetryDeps: services import retry, so it brings nothing but
// amqp091-go, go-amqp (AMQP 1.0, for native queues), the standard
// library, contract and rabbitmq (the release profiles, a leaf).
func TestRetryDeps(t *testing.T) {
	for _, d := range deps(t, "retry") {
		if !strings.Contains(strings.SplitN(d, "/", 2)[0], ".") {
			continue // standard library
		}
		if d == module+"retry" || d == module+"contract" || d == module+"rabbitmq" || strings.HasPrefix(d, "github.com/rabbitmq/amqp091-go") ||
			strings.HasPrefix(d, "github.com/Azure/go-amqp") {
			continue
		}
		t.Errorf("retry depends on %s", d)
	}
}

// TestPlanDeps: plan, pure, knows only the model and the contract of
// rmqtopo's own packages (docs/architecture.md says so).
func TestPlanDeps(t *testing.T) {
	for _, d := range deps(t, "plan") {
		if !strings.HasPrefix(d, module) {
			continue
		}
		switch d {
		case module + "plan", module + "topology", module + "contract", module + "rabbitmq", module + "internal/english":
		default:
			t.Errorf("plan depends on %s", d)
		}
	}
}

// TestMoveDeps: internal/move is the one engine of message moves, shared by
// ops and internal/broker, so it brings nothing but amqp091-go, the
// standard library and contract (which headers are the broker's); it
// cannot import either of them. Its Result is the dlq commands' own.
func TestMoveDeps(t *testing.T) {
	for _, d := range deps(t, "internal/move") {
		if !strings.Contains(strings.SplitN(d, "/", 2)[0], ".") {
			continue // standard library
		}
		if d == module+"internal/move" || d == module+"contract" || strings.HasPrefix(d, "github.com/rabbitmq/amqp091-go") ||
			strings.HasPrefix(d, "github.com/Azure/go-amqp") {
			continue
		}
		t.Errorf("internal/move depends on %s", d)
	}
}

// TestRabbitmqDeps: the release profiles are a leaf, the standard library
// only, so that every package may ask them, retry included.
func TestRabbitmqDeps(t *testing.T) {
	for _, d := range deps(t, "rabbitmq") {
		if d != module+"rabbitmq" && strings.Contains(strings.SplitN(d, "/", 2)[0], ".") {
			t.Errorf("rabbitmq depends on %s", d)
		}
	}
}

// TestTargetDeps: apply/target is what a broker implements for apply, so
// it knows only the model: internal/broker imports it, and must not reach
// apply or plan through it.
func TestTargetDeps(t *testing.T) {
	for _, d := range deps(t, "apply/target") {
		if !strings.HasPrefix(d, module) {
			continue
		}
		switch d {
		case module + "apply/target", module + "topology", module + "contract", module + "rabbitmq":
		default:
			t.Errorf("apply/target depends on %s", d)
		}
	}
}

// TestRetryOtelDeps: retry/retryotel, which services import, brings
// retry's dependencies and OpenTelemetry's API, nothing of the CLI (no
// YAML, no kong, no spec, no management client) and no SDK: the service
// chooses its exporter and SDK.
func TestRetryOtelDeps(t *testing.T) {
	forbidden := []string{
		module + "spec", module + "plan", module + "cmd", module + "internal", module + "ops", module + "retry/retrymetrics",
		"github.com/alecthomas/kong", "github.com/goccy/go-yaml", "go.yaml.in", "gopkg.in/yaml",
		"github.com/michaelklishin/rabbit-hole", "github.com/prometheus", "go.opentelemetry.io/otel/sdk",
	}
	for _, d := range deps(t, "retry/retryotel") {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				t.Errorf("retry/retryotel depends on %s", d)
			}
		}
	}
}

// TestInternalBelowFeatures: internal/ holds the machinery the rooms share
// (the broker, the move engine, definitions, the test harness), below plan
// and every feature, so no import in it points back up: none of its
// packages reaches plan, apply (apply/target, the model's interfaces, is
// the broker's to implement), render, a feature room or the CLI. Only the
// upgrade move, which lays out a move from a spec, reads spec.
func TestInternalBelowFeatures(t *testing.T) {
	out, err := exec.Command("go", "list", module+"internal/...").Output()
	if err != nil {
		t.Fatalf("go list internal/...: %v", err)
	}
	above := []string{"plan", "apply", "render", "status", "importer", "ops", "cmd", "spec"}
	for _, pkg := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(pkg, module)
		for _, d := range deps(t, rel) {
			d = strings.TrimPrefix(d, module)
			if d == "apply/target" || (rel == "internal/upgrade/bluegreen" && d == "spec") {
				continue
			}
			for _, a := range above {
				if d == a || strings.HasPrefix(d, a+"/") {
					t.Errorf("%s depends on %s", rel, d)
				}
			}
		}
	}
}
