package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/internal/converge"
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
			if diff := cmp.Diff(c.Plan, converge.Out(got, o.vhost)); diff != "" {
				t.Errorf("plan (-%s +got):\n%s", c.Path, diff)
			}
			o.must(t, 0, append([]string{"apply", "--auto-approve", desired}, flags...)...)
			o.must(t, 0, append([]string{"plan", "--detailed-exitcode", desired}, flags...)...)
		})
	}
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
