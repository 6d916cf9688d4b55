package importer_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/importer"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

var update = flag.Bool("update", false, "rewrite testdata/rabbitmq/*.yaml from the current output (review the diff!)")

// TestRabbitMQDefinitions imports every vhost of RabbitMQ's own definitions
// import test files (testdata/rabbitmq, MPL-2.0, see README there). The
// spec must expand to exactly the vhost's topology less what it lists as
// not imported, and the listing and the spec are golden files.
func TestRabbitMQDefinitions(t *testing.T) {
	paths, _ := filepath.Glob("testdata/rabbitmq/*.json")
	if len(paths) == 0 {
		t.Fatal("no definitions files")
	}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, vhost := range vhostsOf(t, data) {
			name := strings.TrimSuffix(filepath.Base(path), ".json") + "." + strings.NewReplacer("/", "root").Replace(vhost)
			t.Run(name, func(t *testing.T) {
				extras, err := importer.Extras(data, vhost)
				if err != nil {
					t.Fatal(err)
				}
				live := fromDefinitions(t, data, vhost)
				res, err := importer.Import(importer.Input{Vhost: vhost, Topology: live, Source: filepath.Base(path), Skipped: extras})
				if err != nil {
					t.Fatal(err)
				}
				want := without(live, res.Skipped)
				if diff := cmp.Diff(want, spec.Expand(res.File)); diff != "" {
					t.Errorf("the imported spec expands differently (-want +got):\n%s\n%s", diff, res.YAML)
				}
				golden(t, filepath.Join("testdata", "rabbitmq", name+".yaml"), res.YAML)
			})
		}
	}
}

// vhostsOf lists a document's vhosts; a document without a vhost list
// describes "/".
func vhostsOf(t *testing.T, data []byte) []string {
	var doc struct {
		Vhosts []struct{ Name string } `json:"vhosts"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, v := range doc.Vhosts {
		out = append(out, v.Name)
	}
	if len(out) == 0 {
		out = []string{"/"}
	}
	return out
}

// without removes from t the objects listed as skipped.
func without(t topology.Topology, skipped []importer.Skipped) topology.Topology {
	gone := map[string]bool{}
	for _, s := range skipped {
		gone[s.Object] = true
	}
	out := topology.Topology{Vhosts: t.Vhosts}
	for _, e := range t.Exchanges {
		if !gone[e.Addr().String()] {
			out.Exchanges = append(out.Exchanges, e)
		}
	}
	for _, q := range t.Queues {
		if !gone[q.Addr().String()] {
			out.Queues = append(out.Queues, q)
		}
	}
	for _, b := range t.Bindings {
		if !gone[b.Addr().String()] {
			out.Bindings = append(out.Bindings, b)
		}
	}
	for _, p := range t.Policies {
		if !gone[p.Addr().String()] {
			out.Policies = append(out.Policies, p)
		}
	}
	return out
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it, then review it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

// TestNoPasswordInSpecs: the definitions files hold users with password
// hashes; no spec imported from them mentions a user or a hash.
func TestNoPasswordInSpecs(t *testing.T) {
	paths, _ := filepath.Glob("testdata/rabbitmq/*.json")
	for _, path := range paths {
		data, _ := os.ReadFile(path)
		var doc struct {
			Users []map[string]any `json:"users"`
		}
		json.Unmarshal(data, &doc)
		for _, vhost := range vhostsOf(t, data) {
			res, err := importer.Import(importer.Input{Vhost: vhost, Topology: fromDefinitions(t, data, vhost), Source: "test"})
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range doc.Users {
				for _, k := range []string{"password_hash", "password"} {
					if h, _ := u[k].(string); h != "" && strings.Contains(string(res.YAML), h) {
						t.Errorf("%s vhost %q: the spec holds the %s of user %v", path, vhost, k, u["name"])
					}
				}
			}
			if strings.Contains(string(res.YAML), "password") {
				t.Errorf("%s vhost %q: the spec mentions a password", path, vhost)
			}
		}
	}
}
