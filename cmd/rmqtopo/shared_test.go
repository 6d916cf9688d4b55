package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/internal/exitcode"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
)

// api sends one management API request as the harness's administrator
// and returns the answer's body.
func (o *online) api(t *testing.T, method, path, body string) []byte {
	t.Helper()
	req, err := http.NewRequest(method, o.b.MgmtURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(o.b.User, o.b.Password)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: HTTP %d %s", method, path, resp.StatusCode, data)
	}
	return data
}

// objects counts what the test's vhost holds: exchanges (rmqtopo's records
// included, amq.* and the default excluded), queues and policies.
func (o *online) objects(t *testing.T) int {
	t.Helper()
	var def struct {
		Exchanges, Queues, Policies []json.RawMessage
	}
	if err := json.Unmarshal(o.api(t, http.MethodGet, "/api/definitions/"+url.PathEscape(o.vhost), ""), &def); err != nil {
		t.Fatal(err)
	}
	return len(def.Exchanges) + len(def.Queues) + len(def.Policies)
}

// Input that validate accepts but the broker would refuse half-way is
// refused before the first write: a policy key typo and a binding from an
// amq.* exchange that does not exist.
func TestApplyRefusesBeforeTheFirstWrite(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, body, want string }{
		{"policy key typo", `queues:
  - name: work
    retry: {delays: [1s]}
policies:
  - {name: limits, pattern: "^work$", apply_to: queues, definition: {max-lenght: 10}}
`, `RabbitMQ does not accept the policy key "max-lenght"; did you mean "max-length"?`},
		{"missing amq exchange", `queues:
  - name: work
    bindings: [{exchange: amq.doesnotexist}]
    retry: {delays: [1s]}
`, `"amq.doesnotexist" is not a built-in exchange`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := newOnline(t)
			path := o.spec(t, "bad.yaml", tc.body)
			stdout, stderr, code := rmqtopo(t, "", append([]string{"apply", "--auto-approve", path}, o.conn()...)...)
			if code != exitcode.Refused || !strings.Contains(stdout, tc.want) || !strings.Contains(stderr, "nothing was written") {
				t.Errorf("exit %d, want 4 with %q\nstdout:\n%s\nstderr:\n%s", code, tc.want, stdout, stderr)
			}
			if n := o.objects(t); n != 0 {
				t.Errorf("the vhost holds %d objects after a refused apply, want 0", n)
			}
		})
	}
}

// A web server that is not RabbitMQ is one clear error and exit 1 for
// plan, apply and status: never "an empty broker".
func TestNotRabbitMQ(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	dir := t.TempDir()
	path := filepath.Join(dir, "s.yaml")
	os.WriteFile(path, []byte("version: 1\nqueues:\n  - name: q\n"), 0o644)
	want := fmt.Sprintf("the server at %s is not a RabbitMQ management API: GET /api/overview: not found (HTTP 404)", srv.URL)
	for _, cmd := range [][]string{{"plan"}, {"apply", "--auto-approve"}, {"status"}, {"status", "--no-drift"}} {
		args := append(append(cmd, path), "--url", srv.URL)
		_, stderr, code := rmqtopo(t, "", args...)
		stderr = withoutProgress(stderr)
		if code != 1 || !strings.Contains(stderr, want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("rmqtopo %s: exit %d, stderr %q; want exit 1 and one line with %q", strings.Join(cmd, " "), code, stderr, want)
		}
	}
}

// A spec that is not a spec but an endless file is refused at once.
func TestSpecSizeLimit(t *testing.T) {
	t.Parallel()
	// Without the limit validate would read /dev/zero until memory runs
	// out: the watchdog turns that into a failure. A guard, not a timing
	// goal: reading 4 MiB and refusing needs milliseconds (0.1 s on a
	// loaded machine).
	guard := waitguard.For(100 * time.Millisecond)
	type result struct {
		stderr string
		code   int
	}
	done := make(chan result, 1)
	go func() {
		_, stderr, code := rmqtopo(t, "", "validate", "/dev/zero")
		done <- result{stderr, code}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(guard):
		t.Fatalf("validate /dev/zero still reading after %s: no size limit", guard)
	}
	stderr, code := r.stderr, r.code
	want := "rmqtopo: /dev/zero: larger than the spec size limit of 4 MiB; raise it with --max-spec-size if the file is really a spec\n"
	if code != 1 || stderr != want {
		t.Errorf("exit %d, stderr %q; want 1, %q", code, stderr, want)
	}
}

// planDeletes runs plan -f json and returns its deletes, sorted.
func planDeletes(t *testing.T, o *online, want int, args ...string) []string {
	t.Helper()
	var doc struct {
		Changes []struct {
			Action  string `json:"action"`
			Address struct {
				Kind, Name, Key string
			} `json:"address"`
		} `json:"changes"`
	}
	out := o.must(t, want, append([]string{"plan", "-f", "json"}, args...)...)
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("plan -f json: %v\n%s", err, out)
	}
	var dels []string
	for _, c := range doc.Changes {
		if c.Action == "delete" {
			dels = append(dels, fmt.Sprintf("%s %s %s", c.Address.Kind, c.Address.Name, c.Address.Key))
		}
	}
	sort.Strings(dels)
	return dels
}

// The pull-request plan tells the truth: after a queue is renamed,
// `plan --prune --against` the vhost's definitions export lists the same
// deletes as the live plan, because the ownership record travels in the
// export.
func TestExportCarriesTheRecord(t *testing.T) {
	t.Parallel()
	o := newOnline(t)
	o.must(t, 0, "apply", "--auto-approve", o.spec(t, "s.yaml", "name: shop\nqueues:\n  - name: old\n    retry: {delays: [1s]}\n"))
	renamed := o.spec(t, "s.yaml", "name: shop\nqueues:\n  - name: new\n    retry: {delays: [1s]}\n")

	export := filepath.Join(o.dir, "export.json")
	os.WriteFile(export, o.api(t, http.MethodGet, "/api/definitions/"+url.PathEscape(o.vhost), ""), 0o644)

	live := planDeletes(t, o, 0, "--prune", renamed)
	if len(live) < 4 {
		t.Fatalf("live plan deletes %q, want the old queue's objects", live)
	}
	// The export has no message counts: the queue deletes are RT003
	// errors there (exit 1), but the deletes are the same.
	offline := planDeletes(t, o, 1, "--prune", "--against", export, renamed)
	if diff := cmp.Diff(live, offline); diff != "" {
		t.Errorf("deletes, live vs --against the export (-live +export):\n%s", diff)
	}
	// A full export (all vhosts, as rabbitmqctl export_definitions gives)
	// carries it too.
	full := filepath.Join(o.dir, "full.json")
	os.WriteFile(full, o.api(t, http.MethodGet, "/api/definitions", ""), 0o644)
	if diff := cmp.Diff(live, planDeletes(t, o, 1, "--prune", "--against", full, renamed)); diff != "" {
		t.Errorf("deletes, live vs --against a full export (-live +export):\n%s", diff)
	}
}

// An export without records (taken before rmqtopo kept them in the vhost,
// or stripped) makes a plan that says so and lists "? may delete";
// --detailed-exitcode counts them as changes.
func TestExportWithoutRecord(t *testing.T) {
	t.Parallel()
	o := newOnline(t)
	o.must(t, 0, "apply", "--auto-approve", o.spec(t, "s.yaml", "exchanges:\n  - {name: ex.old, type: topic}\n"))
	renamed := o.spec(t, "s.yaml", "exchanges:\n  - {name: ex.new, type: topic}\n")
	var def map[string]any
	json.Unmarshal(o.api(t, http.MethodGet, "/api/definitions/"+url.PathEscape(o.vhost), ""), &def)
	var kept []any
	for _, e := range def["exchanges"].([]any) {
		if !strings.HasPrefix(e.(map[string]any)["name"].(string), "rmqtopo.owner.") {
			kept = append(kept, e)
		}
	}
	def["exchanges"] = kept
	export := filepath.Join(o.dir, "old-export.json")
	b, _ := json.Marshal(def)
	os.WriteFile(export, b, 0o644)

	out := o.must(t, 2, "plan", "--prune", "--detailed-exitcode", "--against", export, renamed)
	for _, want := range []string{
		`? exchange "ex.old" in vhost`,
		"# ? may delete: unknown: the source shows no ownership record",
		fmt.Sprintf(`warning[RT008]: vhost %q: the source shows no ownership record`, o.vhost),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
}

// A user tagged monitoring, with read permission only, runs plan and
// status: the least privilege for reviewing a change.
func TestMonitoringUserPlans(t *testing.T) {
	t.Parallel()
	o := newOnline(t)
	path := o.spec(t, "s.yaml", "queues:\n  - name: old\n    retry: {delays: [1s]}\n")
	o.must(t, 0, "apply", "--auto-approve", path)
	user := "mon-" + strings.NewReplacer("/", "-", "_", "-").Replace(o.vhost)
	o.api(t, http.MethodPut, "/api/users/"+url.PathEscape(user), `{"password":"mon-secret","tags":"monitoring"}`)
	t.Cleanup(func() { o.api(t, http.MethodDelete, "/api/users/"+url.PathEscape(user), "") })
	o.api(t, http.MethodPut, "/api/permissions/"+url.PathEscape(o.vhost)+"/"+url.PathEscape(user), `{"configure":"^$","write":"^$","read":".*"}`)
	conn := []string{"--url", o.b.MgmtURL, "--amqp-url", o.b.AMQPURL, "--user", user, "--password", "mon-secret"}

	stdout, stderr, code := rmqtopo(t, "", append([]string{"status", path}, conn...)...)
	if code != 0 || !strings.Contains(stdout, "old") || strings.Contains(stdout, "missing") {
		t.Errorf("status as a monitoring user: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	renamed := o.spec(t, "s.yaml", "queues:\n  - name: new\n    retry: {delays: [1s]}\n")
	stdout, stderr, code = rmqtopo(t, "", append([]string{"plan", "--prune", "--detailed-exitcode", renamed}, conn...)...)
	if code != 2 || !strings.Contains(stdout, `- queue "old" in vhost`) || !strings.Contains(stdout, "no messages at stake") {
		t.Errorf("plan as a monitoring user: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// A user whose permissions do not cover what the plan writes is refused
// before the first write, naming the permission.
func TestApplyChecksPermissions(t *testing.T) {
	t.Parallel()
	o := newOnline(t)
	user := "lim-" + strings.NewReplacer("/", "-", "_", "-").Replace(o.vhost)
	o.api(t, http.MethodPut, "/api/users/"+url.PathEscape(user), `{"password":"lim-secret","tags":"administrator"}`)
	t.Cleanup(func() { o.api(t, http.MethodDelete, "/api/users/"+url.PathEscape(user), "") })
	o.api(t, http.MethodPut, "/api/permissions/"+url.PathEscape(o.vhost)+"/"+url.PathEscape(user),
		`{"configure":"^(rmqtopo\\.|other\\.)","write":".*","read":".*"}`)
	conn := []string{"--url", o.b.MgmtURL, "--amqp-url", o.b.AMQPURL, "--user", user, "--password", "lim-secret"}
	path := o.spec(t, "s.yaml", "queues:\n  - name: work\n    retry: {delays: [1s]}\n")
	stdout, stderr, code := rmqtopo(t, "", append([]string{"apply", "--auto-approve", path}, conn...)...)
	want := fmt.Sprintf(`error[RT012]: user %q may not create queue "work" in vhost %q: configure permission "^(rmqtopo\\.|other\\.)" does not match it`, user, o.vhost)
	if code != exitcode.Refused || !strings.Contains(stdout, want) || !strings.Contains(stderr, "nothing was written") {
		t.Errorf("exit %d, want 4 with\n%s\nstdout:\n%s\nstderr:\n%s", code, want, stdout, stderr)
	}
	if n := o.objects(t); n != 0 {
		t.Errorf("the vhost holds %d objects after a refused apply, want 0", n)
	}
}

// What the broker still refuses mid-apply (a bad policy value) stops the
// apply with an account of what was and was not done, and the ownership
// record owns what was created, so a later prune can remove it.
func TestRefusalMidApplyKeepsTheRecordTrue(t *testing.T) {
	t.Parallel()
	o := newOnline(t)
	path := o.spec(t, "s.yaml", `name: s
queues:
  - name: work
    retry: {delays: [1s]}
policies:
  - {name: limits, pattern: "^work$", apply_to: queues, definition: {max-length: "five"}}
`)
	stdout, stderr, code := rmqtopo(t, "", append([]string{"apply", "--auto-approve", path}, o.conn()...)...)
	// Policies are written first, so that objects are created with their
	// policy in place: the refusal stops the apply before any object.
	for _, want := range []string{"nothing changed; 9 changes not made: create policy \"limits\"", "The ownership record lists what exists.",
		"The broker refused a change: applying again will fail the same way until the spec or the broker changes."} {
		if code != 1 || !strings.Contains(stderr, want) {
			t.Errorf("exit %d, stderr lacks %q\nstdout:\n%s\nstderr:\n%s", code, want, stdout, stderr)
		}
	}
	// The record claims nothing that was not made: prune has nothing to
	// delete, and the spec without its bad policy still creates its queue.
	empty := o.spec(t, "s.yaml", "name: s\nexchanges:\n  - {name: other, type: topic}\n")
	if dels := planDeletes(t, o, 0, "--prune", empty); len(dels) != 0 {
		t.Errorf("after the refused apply, prune would delete %q, which the apply never created", dels)
	}
	fixed := o.spec(t, "s.yaml", "name: s\nqueues:\n  - name: work\n    retry: {delays: [1s]}\n")
	out, _, _ := rmqtopo(t, "", append([]string{"plan", fixed}, o.conn()...)...)
	if !strings.Contains(out, `+ queue "work" in vhost`) {
		t.Errorf("after the refused apply, queue work exists already:\n%s", out)
	}
}
