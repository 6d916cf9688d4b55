package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rabbithole "github.com/michaelklishin/rabbit-hole/v2"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/exitcode"
)

// TestOnlineImportRabbitMQDefinitions imports vhosts of RabbitMQ's own
// definitions test files (exports of RabbitMQ 3.6 to 3.12) and applies
// each imported spec to a vhost of the harness broker, whatever its
// version. Import describes its source and knows nothing of
// the broker the spec will go to, so it writes every policy key as the
// export has it. What the broker refuses, plan and apply refuse before the
// first write, key by key: the keys this broker refuses are found by
// asking it (a policy with the export's definition, then with each key
// alone), never from rmqtopo's own table; 4.x refuses the classic
// mirroring keys ha-* (removed in 4.0) and 4.3 queue-master-locator
// (denied by default). Without those keys the export applies, plans no
// changes, and imports back from the broker as it imported from the file.
func TestOnlineImportRabbitMQDefinitions(t *testing.T) {
	t.Parallel()
	cases := []struct{ file, vhost string }{
		{"case1.json", "/"}, {"case3.json", "/"}, {"case4.json", "/"}, {"case9b.json", "/"},
		{"case9b.json", "bunny_testbed"}, {"case14.json", "/"}, {"failing_case21.json", "/"},
	}
	for _, c := range cases {
		t.Run(c.file+":"+c.vhost, func(t *testing.T) {
			t.Parallel()
			o := newOnline(t)
			src := filepath.Join("..", "..", "importer", "testdata", "rabbitmq", c.file)
			export := readExport(t, src)
			refused := refusedPolicyKeys(t, o, export, c.vhost)
			if len(refused) > 0 {
				t.Logf("the broker refuses %q", refused)
				spec := importFile(t, o, src, c.vhost)
				stdout, stderr, code := rmqtopo(t, "", append([]string{"apply", "--auto-approve", spec}, o.conn()...)...)
				if got := rt009(stdout); code != exitcode.Refused || !slices.Equal(got, refused) {
					t.Fatalf("apply of the export as it is: exit %d, refused policy keys %q, want exit 4 and the broker's %q\n%s%s", code, got, refused, stdout, stderr)
				}
				if qs, ps := vhostObjects(t, o); len(qs)+len(ps) != 0 {
					t.Fatalf("the refused apply wrote queues %q and policies %q", qs, ps)
				}
				src = writeExport(t, o, withoutPolicyKeys(export, c.vhost, refused))
			}
			spec := importFile(t, o, src, c.vhost)
			o.must(t, 0, "apply", "--auto-approve", spec)
			if out := o.must(t, 0, "plan", "--detailed-exitcode", spec); !strings.Contains(out, "No changes.") {
				t.Errorf("plan after apply:\n%s", out)
			}
			live, stderr, code := rmqtopo(t, "", append([]string{"import", "--vhost", o.vhost}, o.conn()...)...)
			if code != 0 {
				t.Fatalf("live import: exit %d\n%s", code, stderr)
			}
			// The live vhost holds the record of the spec applied, named after its file.
			file, _ := os.ReadFile(spec)
			want := strings.Replace(string(file), "version: 1\n", "version: 1\nname: imported\n", 1)
			if diff := cmp.Diff(body(want), body(live)); diff != "" {
				t.Errorf("live import differs from the file's (-want +got):\n%s", diff)
			}
		})
	}
}

// exportDoc is the part of a definitions export the test edits; the rest
// is kept as it is.
type exportDoc map[string]any

func readExport(t *testing.T, path string) exportDoc {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc exportDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return doc
}

func writeExport(t *testing.T, o *online, doc exportDoc) string {
	t.Helper()
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(o.dir, "export.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// importFile imports vhost of a definitions export into a spec for the
// test's vhost and returns its path.
func importFile(t *testing.T, o *online, src, vhost string) string {
	t.Helper()
	stdout, stderr, code := rmqtopo(t, "", "import", "--definitions", src, "--vhost", vhost)
	if code != 0 {
		t.Fatalf("import: exit %d\n%s", code, stderr)
	}
	vhostLine := regexp.MustCompile(`(?m)^vhost:.*$`)
	spec := filepath.Join(o.dir, "imported.yaml")
	if err := os.WriteFile(spec, []byte(vhostLine.ReplaceAllString(stdout, "vhost: "+quote(o.vhost))), 0o644); err != nil {
		t.Fatal(err)
	}
	return spec
}

// exportPolicies are the policies of vhost in an export, as maps.
func exportPolicies(doc exportDoc, vhost string) []map[string]any {
	var out []map[string]any
	list, _ := doc["policies"].([]any)
	for _, p := range list {
		m, ok := p.(map[string]any)
		if v, has := m["vhost"]; ok && (!has || v == vhost) {
			out = append(out, m)
		}
	}
	return out
}

// refusedPolicyKeys asks the broker which keys of the export's policies
// of vhost it refuses, as sorted "POLICY KEY" pairs: a policy whose
// definition it refuses is asked again key by key (with a pattern that
// matches nothing, in the test's vhost).
func refusedPolicyKeys(t *testing.T, o *online, doc exportDoc, vhost string) []string {
	t.Helper()
	mgmt := o.b.Mgmt(t)
	accepts := func(applyTo string, def map[string]any) bool {
		res, err := mgmt.PutPolicy(o.vhost, "rmqtopo-probe", rabbithole.Policy{Pattern: "^rmqtopo-probe-matches-nothing$", ApplyTo: applyTo, Definition: def})
		if err != nil {
			return false
		}
		res.Body.Close()
		if res, err := mgmt.DeletePolicy(o.vhost, "rmqtopo-probe"); err == nil {
			res.Body.Close()
		}
		return true
	}
	var refused []string
	for _, p := range exportPolicies(doc, vhost) {
		def, _ := p["definition"].(map[string]any)
		applyTo, _ := p["apply-to"].(string)
		if accepts(applyTo, def) {
			continue
		}
		for key, value := range def {
			if !accepts(applyTo, map[string]any{key: value}) {
				refused = append(refused, fmt.Sprintf("%s %s", p["name"], key))
			}
		}
	}
	slices.Sort(refused)
	return refused
}

// withoutPolicyKeys is doc without the refused "POLICY KEY" pairs in
// vhost's policies, and without a policy left with no key.
func withoutPolicyKeys(doc exportDoc, vhost string, refused []string) exportDoc {
	var kept []any
	list, _ := doc["policies"].([]any)
	for _, p := range list {
		m, _ := p.(map[string]any)
		if v, has := m["vhost"]; has && v != vhost {
			kept = append(kept, p)
			continue
		}
		def, _ := m["definition"].(map[string]any)
		for key := range def {
			if slices.Contains(refused, fmt.Sprintf("%s %s", m["name"], key)) {
				delete(def, key)
			}
		}
		if len(def) > 0 {
			kept = append(kept, m)
		}
	}
	doc["policies"] = kept
	return doc
}

var rt009Line = regexp.MustCompile(`(?m)^\s*error\[RT009\]: policy "([^"]+)" in vhost "[^"]*": RabbitMQ \S+ does not accept the policy key "([^"]+)"`)

// rt009 is the "POLICY KEY" pairs a plan refuses with RT009, sorted.
func rt009(out string) []string {
	var got []string
	for _, m := range rt009Line.FindAllStringSubmatch(out, -1) {
		got = append(got, m[1]+" "+m[2])
	}
	slices.Sort(got)
	return got
}

// vhostObjects names the queues and policies of the test's vhost, but
// the apply lock (an exclusive queue the broker deletes a moment after
// apply's connection closed).
func vhostObjects(t *testing.T, o *online) (queues, policies []string) {
	t.Helper()
	mgmt := o.b.Mgmt(t)
	qs, err := mgmt.ListQueuesIn(o.vhost)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := mgmt.ListPoliciesIn(o.vhost)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if q.Name != contract.LockQueue {
			queues = append(queues, q.Name)
		}
	}
	for _, p := range ps {
		policies = append(policies, p.Name)
	}
	return queues, policies
}
