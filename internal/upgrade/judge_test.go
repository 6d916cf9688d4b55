package upgrade

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/topology"
)

func v(s string) topology.Version {
	ver, err := topology.ParseVersion(s)
	if err != nil {
		panic(err)
	}
	return ver
}

// fake310 is a 3.10 vhost with one object per verdict and clean ones.
func fake310() Snapshot {
	return Snapshot{Version: v("3.10.8"), Vhost: "/",
		Queues: []Queue{
			{Name: "clean.classic", Type: "classic", Durable: true},
			{Name: "clean.quorum", Type: "quorum", Durable: true, Arguments: map[string]any{"x-delivery-limit": float64(5)}},
			{Name: "clean.exclusive", Type: "classic", Exclusive: true},
			{Name: "transient", Type: "classic"},
			{Name: "v1", Type: "classic", Durable: true, Arguments: map[string]any{"x-queue-version": float64(1)}},
			{Name: "locator", Type: "classic", Durable: true, Arguments: map[string]any{"x-queue-master-locator": "min-masters"}},
			{Name: "lazy", Type: "classic", Durable: true, Arguments: map[string]any{"x-queue-mode": "lazy"}},
			{Name: "nolimit", Type: "quorum", Durable: true, Arguments: map[string]any{"x-dead-letter-exchange": "dlx"}},
			{Name: "timeout", Type: "classic", Durable: true, Effective: map[string]any{"consumer-timeout": float64(1000)}},
		},
		Policies: []Policy{
			{Name: "ha", Pattern: "^ha", Definition: map[string]any{"ha-mode": "all"}},
			{Name: "clean", Pattern: "^clean", Definition: map[string]any{"max-length": float64(10)}},
		},
		Channels:  []Channel{{Name: "c1", User: "guest", GlobalPrefetch: 10}, {Name: "c2", User: "guest"}},
		Exchanges: []Exchange{{Name: "t", Type: "topic"}, {Name: "d", Type: "direct"}},
		Bindings: []Binding{
			{Source: "t", Destination: "clean.classic", DestinationType: "queue", RoutingKey: "a.#.#.#"},
			{Source: "t", Destination: "clean.classic", DestinationType: "queue", RoutingKey: "#.b.#"},
			{Source: "d", Destination: "clean.classic", DestinationType: "queue", RoutingKey: "#.#.#"},
		},
	}
}

func codesOf(r Report) []string {
	var out []string
	for _, v := range r.Verdicts {
		out = append(out, v.Code+" "+v.Kind+" "+v.Name+" "+v.Key)
	}
	return out
}

func TestJudge(t *testing.T) {
	for _, tc := range []struct {
		target string
		want   []string
	}{
		{"4.0", []string{
			"UP102 policy ha ha-mode",
			"UP103 queue lazy x-queue-mode",
			"UP105 queue transient durable",
			"UP106 queue nolimit x-delivery-limit",
			"UP110 vhost / x-death",
			"UP112 vhost / ",
		}},
		{"4.3", []string{
			"UP101 queue locator x-queue-master-locator",
			"UP101 queue v1 x-queue-version",
			"UP102 policy ha ha-mode",
			"UP103 queue lazy x-queue-mode",
			"UP105 queue transient durable",
			"UP106 queue nolimit x-delivery-limit",
			"UP107 queue clean.quorum delivery-limit",
			"UP107 queue nolimit delivery-limit",
			"UP108 queue timeout consumer-timeout",
			"UP109 channel c1 global_prefetch_count",
			"UP110 vhost / x-death",
			"UP112 vhost / ",
			"UP114 binding t -> queue clean.classic routing_key",
		}},
	} {
		target, err := Target(tc.target)
		if err != nil {
			t.Fatal(err)
		}
		r := Judge(fake310(), target)
		if diff := cmp.Diff(tc.want, codesOf(r)); diff != "" {
			t.Errorf("3.10 → %s verdicts (-want +got):\n%s", tc.target, diff)
		}
	}
}

// From 4.0 to 4.3 the default limit and x-death changed already.
func TestJudgeFrom40(t *testing.T) {
	s := fake310()
	s.Version, s.DeprecatedKnown, s.Deprecated = v("4.0.5"), true, []string{"transient_nonexcl_queues"}
	s.Policies = s.Policies[1:]
	got := codesOf(Judge(s, v("4.3")))
	for _, c := range got {
		if strings.HasPrefix(c, "UP106") || strings.HasPrefix(c, "UP110") || strings.HasPrefix(c, "UP112") {
			t.Errorf("4.0 → 4.3: unexpected %s", c)
		}
	}
	for _, want := range []string{"UP111 deprecated-feature transient_nonexcl_queues", "UP113 vhost / global_prefetch_count"} {
		if !strings.Contains(strings.Join(got, "\n"), want) {
			t.Errorf("4.0 → 4.3: no %q: %v", want, got)
		}
	}
}

func TestRoute(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		khepri   bool
		ha       bool
		want     string
	}{
		{"3.10.8", "4.0", false, false, "blue-green"},
		{"3.12.1", "4.3", false, false, "blue-green"},
		{"3.13.7", "4.0", false, false, "in-place 3.13→4.0"},
		{"3.13.7", "4.2", false, false, "in-place 3.13→4.2"},
		{"3.13.7", "4.3", false, false, "in-place 3.13→4.2,4.2→4.3"},
		{"3.13.7", "4.0", true, false, "blue-green"},
		{"3.13.7", "4.0", false, true, "blue-green"},
		{"4.0.5", "4.3", false, false, "in-place 4.0→4.1,4.1→4.2,4.2→4.3"},
		{"4.2.3", "4.3", false, false, "in-place 4.2→4.3"},
		{"3.10.8", "3.12", false, false, "in-place 3.10→3.11,3.11→3.12"},
	} {
		s := Snapshot{Version: v(tc.from), Khepri: tc.khepri}
		if tc.ha {
			s.Queues = []Queue{{Name: "m", Type: "classic", Effective: map[string]any{"ha-mode": "all"}}}
		}
		r := PlanRoute(s, v(tc.to))
		got := r.Kind
		if len(r.Hops) > 0 {
			got += " " + strings.Join(r.Hops, ",")
		}
		if got != tc.want {
			t.Errorf("%s → %s (khepri %v, ha %v): %q, want %q (%v)", tc.from, tc.to, tc.khepri, tc.ha, got, tc.want, r.Why)
		}
	}
}

func TestRender(t *testing.T) {
	r := Judge(fake310(), v("4.3.6"))
	var text, js bytes.Buffer
	if err := Text(&text, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"UP101  error", "x-queue-version=1", "Route: blue-green", "4 error(s), 9 warning(s)"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	if err := JSON(&js, r); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Source   string    `json:"source_version"`
		Errors   int       `json:"errors"`
		Verdicts []Verdict `json:"verdicts"`
		Route    Route     `json:"route"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Source != "3.10.8" || back.Errors != 4 || len(back.Verdicts) != 13 || back.Route.Kind != "blue-green" {
		t.Errorf("json: %+v", back)
	}
}

// Every code the judge uses is registered, with a meaning.
func TestCodesRegistered(t *testing.T) {
	for _, c := range Codes {
		if c.Meaning == "" || !strings.HasPrefix(c.Code, "UP1") {
			t.Errorf("code %+v", c)
		}
	}
}

// Every code has its row in docs/upgrades.md, with its severity and
// effect.
func TestCodesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/upgrades.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range Codes {
		row := fmt.Sprintf("| `%s` | %s | %s |", c.Code, c.Severity, c.Effect)
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/upgrades.md has no row %q", row)
		}
	}
}

// A series names its newest known patch; a patch stays as given.
func TestTarget(t *testing.T) {
	for in, want := range map[string]string{"4.3": "4.3.6", "4.0": "4.0.5", "4.3.2": "4.3.2", "4.2": "4.2.0"} {
		got, err := Target(in)
		if err != nil || got.String() != want {
			t.Errorf("Target(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
}
