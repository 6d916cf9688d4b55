package render_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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
	// Each case runs the terraform binary: side by side, they take the
	// time of the slowest instead of the sum.
	t.Parallel()
	tf, err := exec.LookPath("terraform")
	if err != nil {
		t.Log("terraform is not on PATH: checking labels and references only, not terraform fmt")
	}
	for name, top := range renderCases(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
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

// TestTerraformEvaluates has Terraform itself evaluate each rendering
// (when terraform is on PATH) and wants the topology back: escapes,
// number and boolean types, and jsonencode'd arguments all survive. The
// provider cannot be installed offline, so the resources are turned into
// locals of the same shape and printed by `terraform console`; policy
// values then go through what the provider does to them (string, then an
// integer where one parses).
func TestTerraformEvaluates(t *testing.T) {
	// Each case runs the terraform binary: side by side, they take the
	// time of the slowest instead of the sum.
	t.Parallel()
	tf, err := exec.LookPath("terraform")
	if err != nil {
		t.Skip("terraform is not on PATH")
	}
	for name, want := range renderCases(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			if err := render.Terraform(&buf, want); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(terraformAsLocals(buf.String())), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(tf, "console")
			cmd.Dir = dir
			cmd.Stdin = strings.NewReader("base64encode(jsonencode(local.all))\n")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("terraform console: %v\n%s", err, out)
			}
			m := regexp.MustCompile(`(?m)^"([A-Za-z0-9+/=]+)"$`).FindSubmatch(out)
			if m == nil {
				t.Fatalf("no value from terraform console:\n%s", out)
			}
			data, err := base64.StdEncoding.DecodeString(string(m[1]))
			if err != nil {
				t.Fatal(err)
			}
			got := terraformTopology(t, data)
			got.Vhosts = want.Vhosts
			got.Sort()
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("terraform's reading of the rendering (-want +got):\n%s", diff)
			}
		})
	}
}

var (
	blockLine     = regexp.MustCompile(`(?m)^(\s+)(settings|policy) \{$`)
	referenceExpr = regexp.MustCompile(`= (rabbitmq_[a-z]+)\.([A-Za-z0-9_-]+)\.name$`)
)

// terraformAsLocals turns each resource into a local object named
// TYPE__LABEL, references into references to those locals, and adds
// local.all holding them all.
func terraformAsLocals(hcl string) string {
	var b strings.Builder
	var names []string
	b.WriteString("locals {\n")
	for _, line := range strings.Split(hcl, "\n") {
		if m := resourceLine.FindStringSubmatch(line); m != nil {
			names = append(names, m[1]+"__"+m[2])
			line = "  " + m[1] + "__" + m[2] + " = {"
		}
		line = blockLine.ReplaceAllString(line, "$1$2 = {")
		line = referenceExpr.ReplaceAllString(line, "= local.${1}__$2.name")
		b.WriteString(line + "\n")
	}
	b.WriteString("  all = {\n")
	for _, n := range names {
		fmt.Fprintf(&b, "    %q = local.%s\n", n, n)
	}
	b.WriteString("  }\n}\n")
	return b.String()
}

// terraformTopology reads the evaluated resources back into a topology.
func terraformTopology(t *testing.T, data []byte) topology.Topology {
	t.Helper()
	var all map[string]map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&all); err != nil {
		t.Fatal(err)
	}
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	boolean := func(m map[string]any, k string) bool { b, _ := m[k].(bool); return b }
	args := func(m map[string]any, k string) topology.Args {
		if s, ok := m[k].(string); ok { // an arguments_json
			var v map[string]any
			d := json.NewDecoder(strings.NewReader(s))
			d.UseNumber()
			if err := d.Decode(&v); err != nil {
				t.Fatalf("%s: %v", k, err)
			}
			return topology.NormalizeArgs(v)
		}
		v, _ := m[k].(map[string]any)
		return topology.NormalizeArgs(v)
	}
	var got topology.Topology
	for key, r := range all {
		s, _ := r["settings"].(map[string]any)
		switch typ, _, _ := strings.Cut(key, "__"); typ {
		case "rabbitmq_exchange":
			got.Exchanges = append(got.Exchanges, topology.Exchange{Vhost: str(r, "vhost"), Name: str(r, "name"),
				Type: str(s, "type"), Durable: boolean(s, "durable"), AutoDelete: boolean(s, "auto_delete"),
				Arguments: args(s, "arguments")})
		case "rabbitmq_queue":
			got.Queues = append(got.Queues, topology.Queue{Vhost: str(r, "vhost"), Name: str(r, "name"),
				Durable: boolean(s, "durable"), AutoDelete: boolean(s, "auto_delete"), Arguments: args(s, "arguments_json")})
		case "rabbitmq_binding":
			got.Bindings = append(got.Bindings, topology.Binding{Vhost: str(r, "vhost"), Source: str(r, "source"),
				Destination: str(r, "destination"), DestinationType: str(r, "destination_type"),
				RoutingKey: str(r, "routing_key"), Arguments: args(r, "arguments_json")})
		case "rabbitmq_policy":
			p, _ := r["policy"].(map[string]any)
			prio, _ := p["priority"].(json.Number).Int64()
			got.Policies = append(got.Policies, topology.Policy{Vhost: str(r, "vhost"), Name: str(r, "name"),
				Pattern: str(p, "pattern"), ApplyTo: str(p, "apply_to"), Priority: prio,
				Definition: providerPolicyDefinition(args(p, "definition"))})
		}
	}
	return got
}

// providerPolicyDefinition does to a definition what Terraform's map of
// strings and the provider's putPolicy do: every value becomes a string,
// and one that parses as an integer becomes that integer.
func providerPolicyDefinition(def topology.Args) topology.Args {
	for k, v := range def {
		s := fmt.Sprint(v)
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			def[k] = n
		} else {
			def[k] = s
		}
	}
	return def
}
