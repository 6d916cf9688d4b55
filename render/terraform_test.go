package render_test

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/render"
	"github.com/rmqtopo/rmqtopo/topology"
)

// oddArgs is a topology whose argument values the specs cannot produce but
// a broker can hold: every JSON type, and strings HCL must escape.
var oddArgs = topology.Topology{
	Vhosts: []string{"/"},
	Exchanges: []topology.Exchange{{Vhost: "/", Name: "odd", Type: "topic", Durable: true,
		Arguments: topology.Args{"alternate-exchange": "a${b}%{c}\"d\\e\nf\tg ключ \u0007"}}},
	Queues: []topology.Queue{{Vhost: "/", Name: "odd.q", Durable: true, Arguments: topology.NormalizeArgs(map[string]any{
		"x-list":  []any{int64(1), "a", true, nil, map[string]any{"k": int64(2), "j": "v"}, []any{}},
		"x-table": map[string]any{"k": "v", "ключ": int64(1), "y": map[string]any{}, "nested": map[string]any{"z": 1.5}},
		"x-float": 0.25, "x-neg": int64(-7), "x-bool": false,
	})}},
	Bindings: []topology.Binding{
		{Vhost: "/", Source: "amq.topic", Destination: "odd.q", DestinationType: "queue", RoutingKey: "#"},
		{Vhost: "/", Source: "odd", Destination: "elsewhere", DestinationType: "exchange", RoutingKey: "k"},
	},
	Policies: []topology.Policy{{Vhost: "/", Name: "odd", Pattern: "^odd$", ApplyTo: "all", Priority: 1,
		Definition: topology.Args{"max-length": int64(10), "alternate-exchange": "odd"}}},
}

// TestTerraformIsFormatted renders every case and wants output that
// `terraform fmt` leaves alone (when terraform is on PATH), resource labels
// Terraform accepts, unique per type, one resource per object, and every
// reference pointing at a resource in the same file.
func TestTerraformIsFormatted(t *testing.T) {
	tf, err := exec.LookPath("terraform")
	if err != nil {
		t.Log("terraform is not on PATH: checking labels and references only, not terraform fmt")
	}
	for name, top := range renderCases(t) {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := render.Terraform(&buf, top); err != nil {
				t.Fatal(err)
			}
			checkTerraformResources(t, top, buf.String())
			if tf == "" {
				return
			}
			cmd := exec.Command(tf, "fmt", "-no-color", "-")
			cmd.Stdin = bytes.NewReader(buf.Bytes())
			cmd.Dir = t.TempDir()
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("terraform fmt: %v\n%s", err, stderr.String())
			}
			if diff := lineDiff(buf.String(), string(out)); diff != "" {
				t.Errorf("terraform fmt changes the output (- rendered, + formatted):\n%s", diff)
			}
		})
	}
}

var (
	resourceLine = regexp.MustCompile(`(?m)^resource "(rabbitmq_[a-z]+)" "([^"]*)" \{$`)
	referenceRE  = regexp.MustCompile(`= (rabbitmq_[a-z]+)\.([^.\s]+)\.name$`)
	hclLabel     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)
)

func checkTerraformResources(t *testing.T, top topology.Topology, hcl string) {
	t.Helper()
	declared := map[string]bool{}
	count := map[string]int{}
	for _, m := range resourceLine.FindAllStringSubmatch(hcl, -1) {
		typ, label := m[1], m[2]
		if !hclLabel.MatchString(label) {
			t.Errorf("%s label %q is not a Terraform identifier", typ, label)
		}
		if declared[typ+"."+label] {
			t.Errorf("two %s resources labelled %q", typ, label)
		}
		declared[typ+"."+label] = true
		count[typ]++
	}
	want := map[string]int{"rabbitmq_exchange": len(top.Exchanges), "rabbitmq_queue": len(top.Queues),
		"rabbitmq_binding": len(top.Bindings), "rabbitmq_policy": len(top.Policies)}
	for typ, n := range want {
		if count[typ] != n {
			t.Errorf("%d %s resources for %d objects", count[typ], typ, n)
		}
	}
	for _, line := range strings.Split(hcl, "\n") {
		if m := referenceRE.FindStringSubmatch(strings.TrimSpace(line)); m != nil && !declared[m[1]+"."+m[2]] {
			t.Errorf("reference to an undeclared resource: %s", strings.TrimSpace(line))
		}
	}
}

// TestIntegrationFixtureGoldens pins the k8s and terraform renderings of
// what the examples do not show: policies, a vhost other than "/", names
// that must be mangled, and argument values of every type.
func TestIntegrationFixtureGoldens(t *testing.T) {
	top := renderCases(t)["fixture"]
	var k8s, tf, odd bytes.Buffer
	if err := render.Kubernetes(&k8s, top, render.K8sOptions{Cluster: "rabbitmq", Namespace: "messaging"}); err != nil {
		t.Fatal(err)
	}
	if err := render.Terraform(&tf, top); err != nil {
		t.Fatal(err)
	}
	if err := render.Terraform(&odd, oddArgs); err != nil {
		t.Fatal(err)
	}
	assertGolden(t, filepath.Join("testdata", "integrations", "fixture.k8s.yaml"), k8s.Bytes())
	assertGolden(t, filepath.Join("testdata", "integrations", "fixture.tf"), tf.Bytes())
	assertGolden(t, filepath.Join("testdata", "integrations", "odd-arguments.tf"), odd.Bytes())
}

// TestTerraformLabels pins how labels are made: dots become underscores
// when that is unambiguous; anything else is cleaned and hashed.
func TestTerraformLabels(t *testing.T) {
	queues := []topology.Queue{
		{Vhost: "/", Name: "orders.created"},
		{Vhost: "/", Name: "orders_created"},
		{Vhost: "/", Name: "orders..created"},
		{Vhost: "billing", Name: "orders.created"},
		{Vhost: "/", Name: "2fast"},
		{Vhost: "/", Name: "..."},
	}
	var buf bytes.Buffer
	if err := render.Terraform(&buf, topology.Topology{Queues: queues}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range resourceLine.FindAllStringSubmatch(buf.String(), -1) {
		got = append(got, regexp.MustCompile(`__[0-9a-f]{8}$`).ReplaceAllString(m[2], "__HASH"))
	}
	want := []string{"orders_created", "orders_created__HASH", "orders_created__HASH", "billing_orders_created__HASH", "_2fast__HASH", "__HASH"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	checkTerraformResources(t, topology.Topology{Queues: queues}, buf.String())
}

// TestTerraformRefuses wants an error, and nothing written, for what the
// provider would declare differently from the topology.
func TestTerraformRefuses(t *testing.T) {
	ex := func(e topology.Exchange) topology.Topology {
		e.Vhost, e.Name, e.Type = "/", "x", "topic"
		return topology.Topology{Exchanges: []topology.Exchange{e}}
	}
	pol := func(v any) topology.Topology {
		return topology.Topology{Policies: []topology.Policy{{Vhost: "/", Name: "p", Pattern: ".", ApplyTo: "all", Definition: topology.Args{"k": v}}}}
	}
	for name, tc := range map[string]struct {
		top  topology.Topology
		want string
	}{
		"internal exchange":    {ex(topology.Exchange{Internal: true}), `exchange "x" in vhost "/" is internal`},
		"number exchange arg":  {ex(topology.Exchange{Arguments: topology.Args{"x-n": int64(1)}}), `argument "x-n" is 1, but rabbitmq_exchange sends only strings`},
		"boolean policy value": {pol(true), `"k" is true, but rabbitmq_policy sends`},
		"integer-like string":  {pol("5"), `"k" is "5", but rabbitmq_policy sends`},
		"float policy value":   {pol(0.5), `"k" is 0.5, but`},
		"list policy value":    {pol([]any{"a"}), `"k" is ["a"], but`},
	} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			err := render.Terraform(&buf, tc.top)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if buf.Len() != 0 {
				t.Errorf("wrote output before refusing:\n%s", buf.String())
			}
		})
	}
}
