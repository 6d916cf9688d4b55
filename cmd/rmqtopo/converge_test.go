package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/internal/converge"
	"github.com/rmqtopo/rmqtopo/topology"
)

// TestOnlineConverge runs the convergence corpus (internal/converge) on
// the harness broker, each case in a vhost of its own: apply the current
// spec, plan the desired one (it must print the case's plan, which
// plan.TestConverge checks offline too), apply it, and plan again: no
// changes.
func TestOnlineConverge(t *testing.T) {
	t.Parallel()
	cases, err := converge.Load("../../plan/testdata/converge")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			o := newOnline(t)
			current, desired := o.caseSpec(t, "current", c.Current), o.caseSpec(t, "desired", c.Desired)
			flags := c.Flags.Args()
			o.must(t, 0, "apply", "--auto-approve", current)
			got := o.must(t, 0, append([]string{"plan", "--rabbitmq-version", converge.RabbitMQ, desired}, flags...)...)
			if diff := cmp.Diff(c.PlanOn(o.release(t)), converge.Out(withoutRouteNotes(got), o.vhost)); diff != "" {
				t.Errorf("plan (-%s +got):\n%s", c.Path, diff)
			}
			o.must(t, 0, append([]string{"apply", "--auto-approve", desired}, flags...)...)
			o.must(t, 0, append([]string{"plan", "--detailed-exitcode", desired}, flags...)...)
		})
	}
}

// routeNote is a plan's RT110 or RT111 line.
var routeNote = regexp.MustCompile(`(?m)^info\[RT11[01]\]: .*\n`)

// withoutRouteNotes is a live plan without its RT110 lines (how a queue's
// retries travel) and RT111 lines (what another consumer sees), which the CLI adds from the spec's resolved layouts and
// plan.Check alone, which the corpus also runs offline, does not: the
// corpus is about what changes; TestCheckRoutes and version_judged.txtar
// hold RT110.
func withoutRouteNotes(plan string) string {
	// A block of diagnostics that held only such lines leaves its blank
	// line behind.
	return strings.ReplaceAll(routeNote.ReplaceAllString(plan, ""), "\n\n\n", "\n\n")
}

// release is the harness broker's version.
func (o *online) release(t *testing.T) topology.Version {
	t.Helper()
	c, err := broker.NewClient(broker.Config{URL: o.b.MgmtURL, User: o.b.User, Password: o.b.Password})
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.Version(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// caseSpec writes a spec of a case for the test's vhost as dir/spec.yaml:
// the same base name for both, so one spec at two points in time.
func (o *online) caseSpec(t *testing.T, dir string, data []byte) string {
	t.Helper()
	path := filepath.Join(o.dir, dir, "spec.yaml")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, converge.In(data, o.vhost), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
