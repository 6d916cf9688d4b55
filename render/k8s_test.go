package render_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/rmqtopo/rmqtopo/render"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

// crdSchemas compiles the openAPIV3Schema of each vendored operator CRD,
// keyed by kind. Kubernetes prunes fields a structural schema does not
// declare instead of refusing them, which would hide a misspelt or
// unsupported field (an exchange's "internal", say) until the broker
// differs from the spec; so every object schema that does not preserve
// unknown fields is made to refuse them here.
func crdSchemas(t *testing.T) map[string]*jsonschema.Schema {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "k8s-crds", "*.yaml"))
	if err != nil || len(paths) != 4 {
		t.Fatalf("want the 4 vendored CRDs, found %v (%v)", paths, err)
	}
	out := map[string]*jsonschema.Schema{}
	for _, p := range paths {
		var crd struct {
			Spec struct {
				Group    string
				Names    struct{ Kind string }
				Versions []struct {
					Name   string
					Schema struct {
						OpenAPIV3Schema map[string]any `yaml:"openAPIV3Schema"`
					}
				}
			}
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for _, v := range crd.Spec.Versions {
			if crd.Spec.Group+"/"+v.Name != "rabbitmq.com/v1beta1" {
				continue
			}
			out[crd.Spec.Names.Kind] = compileCRDSchema(t, p, refuseUnknownFields(v.Schema.OpenAPIV3Schema))
		}
	}
	for _, kind := range []string{"Exchange", "Queue", "Binding", "Policy"} {
		if out[kind] == nil {
			t.Fatalf("no rabbitmq.com/v1beta1 schema for %s in the vendored CRDs", kind)
		}
	}
	return out
}

func refuseUnknownFields(s map[string]any) map[string]any {
	if props, ok := s["properties"].(map[string]any); ok {
		if s["x-kubernetes-preserve-unknown-fields"] != true {
			s["additionalProperties"] = false
		}
		for _, p := range props {
			if m, ok := p.(map[string]any); ok {
				refuseUnknownFields(m)
			}
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		refuseUnknownFields(items)
	}
	return s
}

func compileCRDSchema(t *testing.T, path string, schema map[string]any) *jsonschema.Schema {
	t.Helper()
	inst := jsonValue(t, schema)
	c := jsonschema.NewCompiler()
	url := "file:///" + filepath.ToSlash(path) + ".schema.json"
	if err := c.AddResource(url, inst); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		t.Fatalf("compile %s: %v", path, err)
	}
	return sch
}

// jsonValue turns a YAML-decoded value into what the validator reads, the
// same way the API server sees the object: as JSON.
func jsonValue(t *testing.T, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

var dns1123 = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

type k8sDoc struct {
	APIVersion string         `yaml:"apiVersion"`
	Kind       string         `yaml:"kind"`
	Metadata   map[string]any `yaml:"metadata"`
	Spec       map[string]any `yaml:"spec"`
	raw        map[string]any
}

// checkK8sStream validates every document of a rendered stream against
// its CRD and Kubernetes' naming rules, and returns the documents.
func checkK8sStream(t *testing.T, schemas map[string]*jsonschema.Schema, stream []byte) []k8sDoc {
	t.Helper()
	var docs []k8sDoc
	seen := map[string]bool{}
	dec := yaml.NewDecoder(bytes.NewReader(stream))
	for i := 0; ; i++ {
		var raw map[string]any
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		var d k8sDoc
		b, _ := yaml.Marshal(raw)
		if err := yaml.Unmarshal(b, &d); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		d.raw = raw
		name, _ := d.Metadata["name"].(string)
		where := fmt.Sprintf("document %d (%s %q)", i, d.Kind, name)
		if d.APIVersion != "rabbitmq.com/v1beta1" {
			t.Errorf("%s: apiVersion %q", where, d.APIVersion)
		}
		sch := schemas[d.Kind]
		if sch == nil {
			t.Errorf("%s: no CRD for kind %q", where, d.Kind)
			continue
		}
		if err := sch.Validate(jsonValue(t, raw)); err != nil {
			t.Errorf("%s does not validate against the %s CRD: %v", where, d.Kind, err)
		}
		if len(name) > 253 || !dns1123.MatchString(name) {
			t.Errorf("%s: metadata.name is not an RFC 1123 subdomain of at most 253 characters", where)
		}
		for k := range d.Metadata {
			if k != "name" && k != "namespace" {
				t.Errorf("%s: unexpected metadata.%s", where, k)
			}
		}
		if key := d.Kind + "/" + name; seen[key] {
			t.Errorf("%s: a second %s with the same name", where, d.Kind)
		} else {
			seen[key] = true
		}
		docs = append(docs, d)
	}
	return docs
}

// k8sTopology reads rendered objects back the way the operator declares
// them: spec.type becomes x-queue-type again.
func k8sTopology(t *testing.T, docs []k8sDoc) topology.Topology {
	t.Helper()
	var got topology.Topology
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	boolean := func(m map[string]any, k string) bool { b, _ := m[k].(bool); return b }
	args := func(m map[string]any, k string) map[string]any { a, _ := m[k].(map[string]any); return a }
	for _, d := range docs {
		s := d.Spec
		switch d.Kind {
		case "Exchange":
			got.Exchanges = append(got.Exchanges, topology.Exchange{Vhost: str(s, "vhost"), Name: str(s, "name"),
				Type: str(s, "type"), Durable: boolean(s, "durable"), AutoDelete: boolean(s, "autoDelete"),
				Arguments: topology.NormalizeArgs(args(s, "arguments"))})
		case "Queue":
			a := args(s, "arguments")
			if typ := str(s, "type"); typ != "" {
				if a == nil {
					a = map[string]any{}
				}
				a["x-queue-type"] = typ
			}
			got.Queues = append(got.Queues, topology.Queue{Vhost: str(s, "vhost"), Name: str(s, "name"),
				Durable: boolean(s, "durable"), AutoDelete: boolean(s, "autoDelete"), Arguments: topology.NormalizeArgs(a)})
		case "Binding":
			got.Bindings = append(got.Bindings, topology.Binding{Vhost: str(s, "vhost"), Source: str(s, "source"),
				Destination: str(s, "destination"), DestinationType: str(s, "destinationType"),
				RoutingKey: str(s, "routingKey"), Arguments: topology.NormalizeArgs(args(s, "arguments"))})
		case "Policy":
			prio, _ := s["priority"].(int)
			got.Policies = append(got.Policies, topology.Policy{Vhost: str(s, "vhost"), Name: str(s, "name"),
				Pattern: str(s, "pattern"), ApplyTo: str(s, "applyTo"), Priority: int64(prio),
				Definition: topology.NormalizeArgs(args(s, "definition"))})
		}
	}
	return got
}

// k8sFixture is a spec with what the examples lack: policies, a second
// vhost, and names Kubernetes does not accept as they are.
const k8sFixture = `version: 1
vhost: billing
exchanges:
  - name: In_Box
    type: headers
    arguments: {alternate-exchange: "!!!"}
  - {name: "!!!", type: fanout}
queues:
  - name: Invoices_Due
    type: quorum
    bindings: [{exchange: In_Box, arguments: {x-match: any, a: "1", b: 2}}]
    retry: {delays: [1s]}
  - name: Ledger Archive
policies:
  - {name: cap, pattern: "^Invoices", apply_to: queues, priority: -3, definition: {max-length: 9, overflow: reject-publish}}
  - {name: empty, pattern: "^x$", apply_to: exchanges, definition: {alternate-exchange: "!!!"}}
`

func k8sCases(t *testing.T) map[string][]*spec.File {
	t.Helper()
	fixture := filepath.Join(t.TempDir(), "fixture.yaml")
	if err := os.WriteFile(fixture, []byte(k8sFixture), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string][]*spec.File{}
	for _, p := range append(renderExamplePaths(t), "fixture") {
		path := filepath.Join("..", p)
		if p == "fixture" {
			path = fixture
		}
		files, err := spec.LoadFiles(path)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		cases[p] = files
	}
	// Both the fixture and an example, in one stream: two vhosts.
	cases["fixture+examples/shop.yaml"] = append(append([]*spec.File{}, cases["fixture"]...), cases["examples/shop.yaml"]...)
	return cases
}

// renderCases are the examples, the k8s fixture, and oddArgs.
func renderCases(t *testing.T) map[string]topology.Topology {
	t.Helper()
	cases := map[string]topology.Topology{"odd arguments": oddArgs}
	for name, files := range k8sCases(t) {
		cases[name] = spec.Expand(files...)
	}
	return cases
}

// TestKubernetesValidatesAgainstCRDs renders every example and the fixture,
// validates each object against the operator's CRD schema, and reads the
// objects back into the topology they came from: nothing dropped or changed.
func TestKubernetesValidatesAgainstCRDs(t *testing.T) {
	schemas := crdSchemas(t)
	for name, want := range renderCases(t) {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := render.Kubernetes(&buf, want, render.K8sOptions{Cluster: "rabbitmq", Namespace: "messaging"}); err != nil {
				t.Fatal(err)
			}
			docs := checkK8sStream(t, schemas, buf.Bytes())
			for _, d := range docs {
				ref, _ := d.Spec["rabbitmqClusterReference"].(map[string]any)
				if ref["name"] != "rabbitmq" || d.Metadata["namespace"] != "messaging" {
					t.Errorf("%s %v: cluster reference %v, namespace %v", d.Kind, d.Metadata["name"], ref, d.Metadata["namespace"])
				}
			}
			got := k8sTopology(t, docs)
			got.Vhosts = want.Vhosts
			got.Sort()
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("k8s objects read back (-want +got):\n%s", diff)
			}
		})
	}
}

// TestKubernetesNames pins how names are made valid: kept when valid in
// vhost "/", otherwise lowercased, cleaned, and given a hash of the
// object's identity, so the same name in two vhosts gives two objects.
func TestKubernetesNames(t *testing.T) {
	long := strings.Repeat("Long.Name_", 40)
	top := topology.Topology{
		Queues: []topology.Queue{
			{Vhost: "/", Name: "orders.created", Durable: true},
			{Vhost: "/", Name: "Orders_Created", Durable: true},
			{Vhost: "/", Name: "orders_created", Durable: true},
			{Vhost: "billing", Name: "orders.created", Durable: true},
			{Vhost: "/", Name: "...", Durable: true},
			{Vhost: "/", Name: long, Durable: true},
		},
	}
	names := func() []string {
		var buf bytes.Buffer
		if err := render.Kubernetes(&buf, top, render.K8sOptions{Cluster: "c"}); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, d := range checkK8sStream(t, crdSchemas(t), buf.Bytes()) {
			out = append(out, d.Metadata["name"].(string))
		}
		return out
	}
	got := names()
	hashed := regexp.MustCompile(`-[0-9a-f]{8}$`)
	want := []string{"orders.created", "orders-created-", "orders-created-", "billing.orders.created-", "", "long.name-long.name-"}
	for i, n := range got {
		if i == 0 {
			if n != want[0] {
				t.Errorf("valid name changed: %q", n)
			}
			continue
		}
		if !strings.HasPrefix(n, want[i]) || !hashed.MatchString("-"+strings.TrimPrefix(n, want[i])) {
			t.Errorf("queue %q: name %q, want %q followed by a hash", top.Queues[i].Name, n, want[i])
		}
	}
	if len(got[5]) > 253 {
		t.Errorf("long name not cut: %d characters", len(got[5]))
	}
	if got[1] == got[2] {
		t.Errorf("two names mangled alike share %q", got[1])
	}
	if diff := cmp.Diff(got, names()); diff != "" {
		t.Errorf("names are not deterministic (-first +second):\n%s", diff)
	}
}

// TestKubernetesRefuses wants an error and no output for what the operator
// cannot declare.
func TestKubernetesRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		top  topology.Topology
		want string
	}{
		"internal exchange": {topology.Topology{Exchanges: []topology.Exchange{{Vhost: "/", Name: "hidden", Type: "topic", Internal: true}}},
			`exchange "hidden" in vhost "/" is internal`},
		"applyTo": {topology.Topology{Policies: []topology.Policy{{Vhost: "/", Name: "p", Pattern: ".", ApplyTo: "everything"}}},
			`policy "p" in vhost "/" applies to "everything"`},
	} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			err := render.Kubernetes(&buf, tc.top, render.K8sOptions{Cluster: "rabbitmq"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if buf.Len() != 0 {
				t.Errorf("wrote output before refusing:\n%s", buf.String())
			}
		})
	}
}

// TestCRDSchemasRefuse shows the validation above has teeth: objects the
// operator would refuse, or whose fields it would silently prune, fail.
func TestCRDSchemasRefuse(t *testing.T) {
	schemas := crdSchemas(t)
	ref := map[string]any{"name": "rabbitmq"}
	for name, tc := range map[string]struct {
		kind string
		spec map[string]any
	}{
		"exchange field the CRD lacks": {"Exchange", map[string]any{"name": "x", "internal": true, "rabbitmqClusterReference": ref}},
		"binding destinationType":      {"Binding", map[string]any{"destinationType": "stream", "rabbitmqClusterReference": ref}},
		"policy without definition":    {"Policy", map[string]any{"name": "p", "pattern": ".", "rabbitmqClusterReference": ref}},
		"queue without cluster":        {"Queue", map[string]any{"name": "q"}},
		"queue durable as a string":    {"Queue", map[string]any{"name": "q", "durable": "yes", "rabbitmqClusterReference": ref}},
	} {
		doc := map[string]any{"apiVersion": "rabbitmq.com/v1beta1", "kind": tc.kind,
			"metadata": map[string]any{"name": "n"}, "spec": tc.spec}
		if err := schemas[tc.kind].Validate(jsonValue(t, doc)); err == nil {
			t.Errorf("%s: the %s schema accepts %v", name, tc.kind, tc.spec)
		}
	}
}
