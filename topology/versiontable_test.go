package topology

import (
	"github.com/rmqtopo/rmqtopo/rabbitmq"
	"slices"
	"testing"
)

// before is a release just before v: 4.3.0 before 4.3.1, 4.2.99 before
// 4.3.0, 3.99.99 before 4.0.0.
func before(v Version) Version {
	switch {
	case v.Patch > 0:
		return rel(v.Major, v.Minor, v.Patch-1)
	case v.Minor > 0:
		return rel(v.Major, v.Minor-1, 99)
	}
	return rel(v.Major-1, 99, 99)
}

// TestVersionTableBounds runs every entry at the releases around its
// bounds: just before and at Since, IgnoredSince and Until.
func TestVersionTableBounds(t *testing.T) {
	for _, f := range VersionTable {
		if f.Cite == "" {
			t.Errorf("%s %s: no citation", f.Kind, f.Name)
		}
		in := Accepted
		check := func(at Version, want Support) {
			t.Helper()
			if got := f.At(at); got != want {
				t.Errorf("%s %s (value %v) at %s: %s, want %s", f.Kind, f.Name, f.Value, at, got, want)
			}
		}
		if f.Since.Known() {
			check(before(f.Since), f.Before)
			check(f.Since, in)
		}
		if f.IgnoredSince.Known() {
			check(before(f.IgnoredSince), Accepted)
			check(f.IgnoredSince, Ignored)
			in = Ignored
		}
		if f.Until.Known() {
			check(before(f.Until), in)
			check(f.Until, Refused)
			check(rel(f.Until.Major, f.Until.Minor, 9), Refused)
		}
		check(Version{}, Accepted) // unknown: left to the broker
	}
}

// TestVersionTableFacts pins the facts checked against rabbitmq-server's
// tags, the wrong ones of the table before it first of all.
func TestVersionTableFacts(t *testing.T) {
	for _, c := range []struct {
		kind  FeatureKind
		name  string
		value any
		at    string
		want  Support
	}{
		// Accepted by 4.0.1 to 4.3.0: not a refusal.
		{FeaturePolicyKey, "max-in-memory-length", nil, "4.0.1", Ignored},
		{FeaturePolicyKey, "max-in-memory-bytes", nil, "4.3.0", Ignored},
		{FeaturePolicyKey, "max-in-memory-bytes", nil, "3.13.7", Accepted},
		// queue-master-locator: accepted by 4.0 to 4.2, denied by default in 4.3.0.
		{FeaturePolicyKey, "queue-master-locator", nil, "4.2.9", Accepted},
		{FeaturePolicyKey, "queue-master-locator", nil, "4.0.0", Accepted},
		{FeaturePolicyKey, "queue-master-locator", nil, "4.3.0", Refused},
		{FeaturePolicyKey, "queue-mode", nil, "4.3.0", Ignored},
		{FeaturePolicyKey, "queue-leader-locator", nil, "3.9.0", Accepted},
		{FeaturePolicyKey, "queue-leader-locator", nil, "3.8.35", Refused},
		{FeatureQueueArgument, "x-queue-master-locator", nil, "4.3.0", Refused},
		{FeatureQueueArgument, "x-queue-master-locator", nil, "4.2.9", Accepted},
		{FeaturePolicyKey, "delayed-retry-min", nil, "4.3.0", Refused},
		{FeaturePolicyKey, "delayed-retry-min", nil, "4.3.1", Accepted},
		{FeaturePolicyKey, "stream-filter-size-bytes", nil, "3.12.14", Refused},
		{FeaturePolicyKey, "stream-filter-size-bytes", nil, "3.13.0", Accepted},
		{FeaturePolicyKey, "target-group-size", nil, "3.12.14", Refused},
		{FeaturePolicyKey, "federation-upstream-pattern", nil, "3.10.8", Accepted},
		{FeaturePolicyKey, "consumer-disconnected-timeout", nil, "4.3.0", Accepted},
		{FeaturePolicyKey, "consumer-disconnected-timeout", nil, "4.2.9", Refused},
		{FeaturePolicyKey, "ha-mode", nil, "3.13.7", Accepted},
		{FeaturePolicyKey, "ha-mode", nil, "4.0.0", Refused},
		{FeatureQueueArgument, "x-queue-mode", nil, "3.11.28", Accepted},
		{FeatureQueueArgument, "x-queue-mode", nil, "4.2.9", Ignored},
		// Release notes said refused; a live 4.3.6 accepts it.
		{FeatureQueueArgument, "x-queue-mode", nil, "4.3.6", Ignored},
		{FeatureQueueArgument, "x-queue-version", int64(1), "4.2.9", Accepted},
		{FeatureQueueArgument, "x-queue-version", int64(1), "4.3.0", Refused},
		{FeatureQueueArgument, "x-queue-version", int64(2), "4.3.0", Accepted},
		{FeatureQueueArgument, "x-delayed-retry-type", nil, "4.2.9", Ignored},
		{FeatureQueueArgument, "x-delayed-retry-type", nil, "4.3.0", Accepted},
		{FeatureQueueType, "stream", nil, "3.8.35", Refused},
		// Permitted by default on 4.3.6 (its /api/deprecated-features).
		{FeatureQueueProperty, "transient", nil, "4.3.6", Accepted},
		{FeatureQueueProperty, "transient", nil, "4.2.9", Accepted},
	} {
		f, ok := LookupFeature(c.kind, c.name, c.value)
		if !ok {
			t.Errorf("%s %s: not in the table", c.kind, c.name)
			continue
		}
		at, err := ParseVersion(c.at)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.At(at); got != c.want {
			t.Errorf("%s %s (value %v) at %s: %s, want %s (%s)", c.kind, c.name, c.value, c.at, got, c.want, f.Cite)
		}
	}
}

func TestVersionTableSorted(t *testing.T) {
	order := map[FeatureKind]int{FeaturePolicyKey: 0, FeatureQueueArgument: 1, FeatureQueueType: 2, FeatureQueueProperty: 3}
	sorted := slices.IsSortedFunc(VersionTable, func(a, b Feature) int {
		if order[a.Kind] != order[b.Kind] {
			return order[a.Kind] - order[b.Kind]
		}
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	if !sorted {
		t.Error("VersionTable is not sorted by kind, then name")
	}
	if (Feature{Since: rel(4, 3, 0), Until: rel(4, 4, 0)}).Span() != "RabbitMQ 4.3.0 to 4.3.x only" {
		t.Error("Span")
	}
}

// TestKeyTableVerdicts pins the disagreements issue 34 found between the
// table and the brokers, as the table now judges them.
func TestKeyTableVerdicts(t *testing.T) {
	v3, v4 := rel(3, 10, 8), rel(4, 3, 6)
	judge := func(kind FeatureKind, name string, value any, typ string, x Facts) Support {
		t.Helper()
		f, ok := LookupFeature(kind, name, value)
		if !ok {
			t.Fatalf("%s %s: not in the table", kind, name)
		}
		return f.JudgeOn(typ, x).Support
	}
	for _, c := range []struct {
		what string
		got  Support
		want Support
	}{
		{"x-initial-cluster-size on quorum", judge(FeatureQueueArgument, "x-initial-cluster-size", nil, "quorum", Facts{Version: v4}), Refused},
		{"x-initial-cluster-size on stream", judge(FeatureQueueArgument, "x-initial-cluster-size", nil, "stream", Facts{Version: v4}), Accepted},
		{"x-consumer-disconnected-timeout on quorum", judge(FeatureQueueArgument, "x-consumer-disconnected-timeout", nil, "quorum", Facts{Version: v4}), Accepted},
		{"federation-upstream, plugin off", judge(FeaturePolicyKey, "federation-upstream", nil, "classic", Facts{Version: v3, Plugins: map[string]bool{"rabbitmq_management": true}}), Refused},
		{"federation-upstream, plugin on", judge(FeaturePolicyKey, "federation-upstream", nil, "classic", Facts{Version: v3, Plugins: map[string]bool{"rabbitmq_federation": true}}), Accepted},
		{"x-queue-mode lazy on 4.3.6", judge(FeatureQueueArgument, "x-queue-mode", "lazy", "classic", Facts{Version: v4}), Ignored},
		{"transient on 4.3.6", judge(FeatureQueueProperty, "transient", nil, "classic", Facts{Version: v4, Deprecated: map[string]string{"transient_nonexcl_queues": PhasePermitted}}), Accepted},
		{"transient, denied live", judge(FeatureQueueProperty, "transient", nil, "classic", Facts{Version: v4, Deprecated: map[string]string{"transient_nonexcl_queues": PhaseDenied}}), Refused},
	} {
		if c.got != c.want {
			t.Errorf("%s: %s, want %s", c.what, c.got, c.want)
		}
	}
	for _, c := range []struct {
		name  string
		value any
		need  string
	}{{"ha-sync-mode", nil, "ha-mode"}, {"ha-params", nil, "ha-mode"}, {"delayed-retry-type", "failed", "delayed-retry-min"}} {
		f, _ := LookupFeature(FeaturePolicyKey, c.name, c.value)
		if len(f.Needs) != 1 || f.Needs[0].Key != c.need {
			t.Errorf("%s %v needs %v, want %s", c.name, c.value, f.Needs, c.need)
		}
	}
}

// TestQuorumPriorities: from 4.0.0 on, and never for an unknown release;
// x-max-priority stays classic only (every release refuses it on a quorum
// queue, probed on 3.10.8, 4.0.5 and 4.3.6).
func TestQuorumPriorities(t *testing.T) {
	for v, want := range map[string]bool{"": false, "3.13.7": false, "4.0.0": true, "4.0.5": true, "4.3.6": true} {
		ver, _ := ParseVersion(v)
		if got := rabbitmq.ProfileFor(ver).QuorumPriorities(); got != want {
			t.Errorf("%q: %v, want %v", v, got, want)
		}
	}
	if f, ok := LookupFeature(FeatureQueueArgument, "x-max-priority", nil); !ok || f.AcceptsType("quorum") {
		t.Errorf("x-max-priority %+v: want it refused on quorum queues", f)
	}
}
