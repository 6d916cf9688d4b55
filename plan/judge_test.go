package plan_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

// judged checks a plan of desired against state, judged for version
// (JudgeVersion's override: "" for the state's own), and returns the
// diagnostics' codes and messages, one line each.
func judged(t *testing.T, state *topology.State, desired topology.Topology, version string) []string {
	t.Helper()
	p := plan.DiffTopology(state.Topology, desired, plan.Options{})
	j, err := plan.JudgeVersion(version, state, "broker")
	if err != nil {
		t.Fatal(err)
	}
	p.RabbitMQ = &j
	var out []string
	for _, d := range plan.Check(p, plan.CheckOptions{State: state}) {
		out = append(out, d.Code+" "+d.Address.Name+": "+d.Message)
	}
	return out
}

func codesOf(lines []string) []string {
	var out []string
	for _, l := range lines {
		out = append(out, l[:5])
	}
	return out
}

func vq(name string, args topology.Args) topology.Queue {
	return topology.Queue{Vhost: "v", Name: name, Durable: true, Arguments: args}
}

// TestOneVersionDrivesEveryCheck (issue 26, point 1): --rabbitmq-version
// judges policy keys (RT009) and queue features (RT011), not only RT10x,
// whatever version the source reports.
func TestOneVersionDrivesEveryCheck(t *testing.T) {
	live := topology.NewState([]string{"v"})
	live.Topology.Vhosts = []string{"v"}
	live.BrokerVersion = "3.10.8"
	desired := topology.Topology{Vhosts: []string{"v"},
		Policies: []topology.Policy{{Vhost: "v", Name: "mirror", Pattern: ".*", ApplyTo: "queues", Definition: topology.Args{"ha-mode": "all"}}},
		Queues: []topology.Queue{
			vq("events", topology.Args{"x-queue-type": "stream"}),
			vq("work", topology.Args{"x-queue-type": "quorum", "x-delivery-limit": int64(5), "x-delayed-retry-type": "returned"}),
		}}
	for _, c := range []struct {
		version string
		want    []string
	}{
		{"", []string{"RT011"}},             // the broker's 3.10.8: no delayed retry
		{"4.0", []string{"RT009", "RT011"}}, // ha-mode is gone
		{"3.8", []string{"RT011", "RT011"}}, // no streams, no delayed retry
		{"4.3.1", []string{"RT009"}},
	} {
		got := judged(t, live, desired, c.version)
		if !slices.Equal(codesOf(got), c.want) {
			t.Errorf("judged for %q: %v, want codes %v", c.version, got, c.want)
		}
	}
}

// TestDeliveryLimitFromPolicy (issue 26, point 2): a quorum queue whose
// rmqtopo policy carries delivery_limit has a limit, and wait queues
// (outbox delay queues among them) deliver to no consumer: no RT101.
func TestDeliveryLimitFromPolicy(t *testing.T) {
	for _, path := range []string{"../examples/shop.yaml", "../examples/presets/outbox.yaml"} {
		files, err := spec.LoadFiles(path)
		if err != nil {
			t.Fatal(err)
		}
		desired := spec.Expand(files...)
		st := topology.NewState(desired.VhostNames())
		for _, l := range judged(t, st, desired, "4.0.5") {
			if !strings.HasPrefix(l, plan.CodeDefaultDeliveryLimit) {
				continue
			}
			name := strings.Fields(l)[1]
			name = strings.TrimSuffix(name, ":")
			if name == "payments.capture" || strings.Contains(name, ".delay_") || strings.Contains(name, ".wait") {
				t.Errorf("%s: false RT101: %s", path, l)
			}
		}
	}
	limited := vq("limited", topology.Args{"x-queue-type": "quorum"})
	bare := vq("bare", topology.Args{"x-queue-type": "quorum"})
	desired := topology.Topology{Vhosts: []string{"v"}, Queues: []topology.Queue{bare, limited},
		Policies: []topology.Policy{{Vhost: "v", Name: "lim", Pattern: "^limited$", ApplyTo: "queues", Definition: topology.Args{"delivery-limit": int64(10)}}}}
	got := codesOf(judged(t, topology.NewState([]string{"v"}), desired, "4.0.5"))
	// lim applies to limited, which has no rmqtopo policy: RT024 says so.
	if !slices.Equal(got, []string{plan.CodePolicyApplies, plan.CodeDefaultDeliveryLimit}) {
		t.Errorf("codes %v, want RT024 (lim applies to limited) and one RT101 (for bare)", got)
	}
}

// TestVersionTableInChecks (issue 26, point 3): the table's corrected
// entries, as plan judges them.
func TestVersionTableInChecks(t *testing.T) {
	pol := func(key string) topology.Policy {
		return topology.Policy{Vhost: "v", Name: "p", Pattern: "^x$", ApplyTo: "queues", Definition: topology.Args{key: int64(1)}}
	}
	for _, c := range []struct {
		version string
		policy  string
		queue   topology.Queue
		want    []string
	}{
		{version: "4.1.0", policy: "max-in-memory-length"},
		// Deprecated since 4.0, permitted by default: an operator can deny it.
		{version: "4.2.9", policy: "queue-master-locator", want: []string{"RT108"}},
		{version: "4.3.0", policy: "queue-master-locator", want: []string{"RT009"}},
		{version: "4.3.0", policy: "queue-mode"},
		{version: "3.9.0", policy: "queue-leader-locator"},
		{version: "4.3.0", policy: "delayed-retry-min", want: []string{"RT009"}},
		{version: "4.3.1", policy: "delayed-retry-min"},
		{version: "3.12.14", policy: "stream-filter-size-bytes", want: []string{"RT009"}},
		{version: "3.12.14", policy: "target-group-size", want: []string{"RT009"}},
		// Only a live broker shows whether the federation plugin is enabled.
		{version: "4.3.0", policy: "federation-upstream-pattern", want: []string{"RT108"}},
		{version: "4.3.0", policy: "consumer-disconnected-timeout"},
		{version: "4.3.0", queue: vq("x", topology.Args{"x-queue-master-locator": "client-local"}), want: []string{"RT103"}},
		{version: "4.2.9", queue: vq("x", topology.Args{"x-queue-master-locator": "client-local"}), want: []string{"RT108"}},
		// A stream's argument; a quorum queue takes x-quorum-initial-group-size.
		{version: "4.0.5", queue: vq("x", topology.Args{"x-queue-type": "quorum", "x-initial-cluster-size": int64(3), "x-delivery-limit": int64(5)}), want: []string{"RT011"}},
		{version: "3.10.8", policy: "ha-sync-mode", want: []string{"RT009"}},
	} {
		desired := topology.Topology{Vhosts: []string{"v"}}
		if c.policy != "" {
			desired.Policies = []topology.Policy{pol(c.policy)}
		} else {
			desired.Queues = []topology.Queue{c.queue}
		}
		got := judged(t, topology.NewState([]string{"v"}), desired, c.version)
		if !slices.Equal(codesOf(got), c.want) {
			t.Errorf("%s %v on %s: %v, want codes %v", c.policy, c.queue.Arguments, c.version, got, c.want)
		}
	}
}

// TestRefusalsSayTheyAreDefaults (issue 26, point 5; issue 34, point 6):
// a transient queue is a deprecated feature. Offline, 4.3's verdict is the
// default (4.3.6 permits it) and says operators can deny it; a live
// broker's phase of the feature decides, and a denial says how operators
// lift it.
func TestRefusalsSayTheyAreDefaults(t *testing.T) {
	q := vq("scratch", nil)
	q.Durable = false
	desired := topology.Topology{Vhosts: []string{"v"}, Queues: []topology.Queue{q}}
	got := judged(t, topology.NewState([]string{"v"}), desired, "4.3.6")
	if len(got) != 1 || !strings.HasPrefix(got[0], plan.CodeDefaultVerdict) ||
		!strings.Contains(got[0], "deprecated_features.permit.transient_nonexcl_queues = false") {
		t.Errorf("offline: %v, want one RT108", got)
	}
	live := topology.NewState([]string{"v"})
	live.BrokerVersion = "4.3.6"
	live.Deprecated = map[string]string{"transient_nonexcl_queues": topology.PhaseDenied}
	got = judged(t, live, desired, "")
	if len(got) != 1 || !strings.HasPrefix(got[0], plan.CodeTransientQueue) || !strings.Contains(got[0], "refuses by default") ||
		!strings.Contains(got[0], "deprecated_features.permit.transient_nonexcl_queues = true") {
		t.Errorf("live, denied: %v, want one RT104", got)
	}
	if got = judged(t, topology.NewState([]string{"v"}), desired, "3.10.8"); len(got) != 0 {
		t.Errorf("3.10.8: %v", got)
	}
}

// TestLivePluginsDecide (issue 34): the federation keys are refused where
// the live broker does not run the plugin, accepted where it does.
func TestLivePluginsDecide(t *testing.T) {
	desired := topology.Topology{Vhosts: []string{"v"}, Policies: []topology.Policy{{Vhost: "v", Name: "fed", Pattern: "^x$",
		ApplyTo: "queues", Definition: topology.Args{"federation-upstream-set": "all"}}}}
	for _, c := range []struct {
		plugins map[string]bool
		want    []string
	}{
		{map[string]bool{"rabbitmq_management": true}, []string{plan.CodeUnknownPolicyKey}},
		{map[string]bool{"rabbitmq_federation": true}, nil},
	} {
		st := topology.NewState([]string{"v"})
		st.BrokerVersion, st.Plugins = "3.10.8", c.plugins
		if got := codesOf(judged(t, st, desired, "")); !slices.Equal(got, c.want) {
			t.Errorf("plugins %v: %v, want %v", c.plugins, got, c.want)
		}
	}
}

// A bad override is a *VersionOverrideError, whose message names no flag
// (the caller words it); a good one judges as FromOverride.
func TestJudgeVersionOverrideError(t *testing.T) {
	st := &topology.State{BrokerVersion: "4.0.5"}
	_, err := plan.JudgeVersion("4.x", st, plan.FromBroker)
	var ve *plan.VersionOverrideError
	if !errors.As(err, &ve) || ve.Value != "4.x" || ve.Err == nil || errors.Unwrap(err) != ve.Err {
		t.Fatalf("JudgeVersion(4.x) = %v (%T), want a *VersionOverrideError", err, err)
	}
	if msg := err.Error(); strings.Contains(msg, "--") || msg != strings.ToLower(msg[:1])+msg[1:] {
		t.Errorf("message %q names a flag or is not lowercase", msg)
	}
	if j, err := plan.JudgeVersion("4.3", st, plan.FromBroker); err != nil || j != (plan.Judged{Version: "4.3.0", From: plan.FromOverride}) {
		t.Errorf("JudgeVersion(4.3) = %+v, %v", j, err)
	}
}
