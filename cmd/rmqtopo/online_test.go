package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/failpoint"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/rabbitmq"
)

// The online tests drive run() in-process against the harness broker
// (TestMain in main_test.go owns it), each in a vhost of its own, with the
// connection given as flags.

type online struct {
	b     *brokertest.Broker
	vhost string
	dir   string
}

func newOnline(t testing.TB) *online {
	t.Helper()
	b := brokertest.Get(t)
	o := &online{b: b, vhost: b.NewVhost(t), dir: t.TempDir()}
	return o
}

// conn are the connection flags for the harness broker.
func (o *online) conn() []string {
	return []string{"--url", o.b.MgmtURL, "--amqp-url", o.b.AMQPURL, "--user", o.b.User, "--password", o.b.Password}
}

// spec writes a spec for the test's vhost and returns its path.
func (o *online) spec(t testing.TB, name, body string) string {
	t.Helper()
	path := filepath.Join(o.dir, name)
	if err := os.WriteFile(path, []byte(fmt.Sprintf("version: 1\nvhost: %q\n%s", o.vhost, body)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// rmqtopo runs the CLI in-process and returns its output and exit code,
// printing errors exactly as main does.
func rmqtopo(t testing.TB, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	code = exitCode(err, &errb)
	return out.String(), errb.String(), code
}

// progressLine is a line apply's progress report prints to stderr every 2 s
// when stderr is not a terminal (applyProgressLine).
var progressLine = regexp.MustCompile(`(?m)^apply: .* \((\d+h)?(\d+m)?\d+s\)\n`)

// withoutProgress is stderr without apply's progress lines, which a busy
// machine adds to any apply that takes 2 s.
func withoutProgress(stderr string) string { return progressLine.ReplaceAllString(stderr, "") }

func (o *online) must(t testing.TB, want int, args ...string) string {
	t.Helper()
	stdout, stderr, code := rmqtopo(t, "", append(args, o.conn()...)...)
	if code != want {
		t.Fatalf("rmqtopo %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, stdout, stderr)
	}
	return stdout
}

const smallSpec = `layout: per-attempt
exchanges:
  - {name: biz, type: topic}
queues:
  - name: work
    type: quorum
    bindings: [{exchange: biz, routing_key: "work.#"}]
    retry: {delays: [1s, 5s]}
`

// stdinTerminal pretends stdin is a terminal for the duration of a test.
func stdinTerminal(t *testing.T) {
	old := stdinIsTerminal
	stdinIsTerminal = func(io.Reader) bool { return true }
	t.Cleanup(func() { stdinIsTerminal = old })
}

func TestOnlineApplyConfirmation(t *testing.T) {
	o := newOnline(t)
	path := o.spec(t, "small.yaml", smallSpec)
	args := append([]string{"apply", path}, o.conn()...)

	_, stderr, code := rmqtopo(t, "yes\n", args...)
	if want := "rmqtopo: apply: stdin is not a terminal, so it cannot ask for confirmation; pass --auto-approve to apply without asking\n"; code != 1 || stderr != want {
		t.Errorf("apply without a terminal: exit %d, stderr %q\nwant %q", code, stderr, want)
	}

	stdinTerminal(t)
	_, stderr, code = rmqtopo(t, "no\n", args...)
	if code != 1 || !strings.HasSuffix(stderr, "rmqtopo: apply cancelled; nothing was changed\n") {
		t.Errorf("answer no: exit %d, stderr %q", code, stderr)
	}
	o.must(t, 2, "plan", "--detailed-exitcode", path)

	stdout, stderr, code := rmqtopo(t, "yes\n", args...)
	if code != 0 || !strings.Contains(stderr, "Only 'yes' will be accepted") || !strings.Contains(stdout, "Apply complete") {
		t.Errorf("answer yes: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	o.must(t, 0, "plan", "--detailed-exitcode", path)
}

// TestOnlineLockHeld: while another connection holds the vhost's lock,
// apply stops with a clear error and changes nothing.
func TestOnlineLockHeld(t *testing.T) {
	t.Parallel()
	o := newOnline(t)
	path := o.spec(t, "small.yaml", smallSpec)
	ch, err := o.b.Dial(t, o.vhost).Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(broker.LockQueue, false, true, true, false, nil); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := rmqtopo(t, "", append([]string{"apply", "--auto-approve", path}, o.conn()...)...)
	stderr = withoutProgress(stderr)
	want := fmt.Sprintf("rmqtopo: apply: another rmqtopo apply holds the lock on vhost %q", o.vhost)
	if code != 1 || !strings.HasPrefix(stderr, want) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("exit %d, stderr %q\nwant one line starting %q", code, stderr, want)
	}
	o.must(t, 2, "plan", "--detailed-exitcode", path)
}

// TestOnlineNewVhost: a spec for a vhost that does not exist plans its
// creation; apply creates it, locks it and fills it.
func TestOnlineNewVhost(t *testing.T) {
	t.Parallel()
	o := newOnline(t)
	o.vhost += "-new"
	t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, o.b.MgmtURL+"/api/vhosts/"+url.PathEscape(o.vhost), nil)
		req.SetBasicAuth(o.b.User, o.b.Password)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	path := o.spec(t, "small.yaml", smallSpec)
	out := o.must(t, 2, "plan", "--detailed-exitcode", path)
	// 4.0+ gives the new quorum queue no return queue (message priority).
	want := "Plan: 13 to create"
	if rabbitmq.ProfileFor(o.release(t)).QuorumPriorities() {
		want = "Plan: 12 to create"
	}
	if !strings.Contains(out, fmt.Sprintf("+ vhost %q", o.vhost)) || !strings.Contains(out, want) {
		t.Errorf("plan:\n%s", out)
	}
	o.must(t, 0, "apply", "--auto-approve", path)
	o.must(t, 0, "plan", "--detailed-exitcode", path)
}

func TestOnlineAgainst(t *testing.T) {
	t.Parallel()
	o := newOnline(t)
	path := o.spec(t, "small.yaml", smallSpec)
	stdout, stderr, code := rmqtopo(t, "", "plan", "--against", "empty", "--detailed-exitcode", path)
	if code != 2 || !strings.Contains(stdout, "Plan: 13 to create") {
		t.Errorf("--against empty: exit %d\n%s%s", code, stdout, stderr)
	}
	o.must(t, 0, "apply", "--auto-approve", path)

	// A multi-vhost export of the whole broker, as rabbitmqctl
	// export_definitions writes it: only the spec's vhost counts.
	req, _ := http.NewRequest(http.MethodGet, o.b.MgmtURL+"/api/definitions", nil)
	req.SetBasicAuth(o.b.User, o.b.Password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	export, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	file := filepath.Join(o.dir, "export.json")
	os.WriteFile(file, export, 0o644)
	stdout, stderr, code = rmqtopo(t, "", "plan", "--against", file, "--detailed-exitcode", path)
	if code != 0 || !strings.Contains(stdout, "No changes.") {
		t.Errorf("--against the export: exit %d\n%s%s", code, stdout, stderr)
	}
	// The single-vhost export (GET /api/definitions/{vhost}) has no vhost
	// fields; it describes the spec's vhost.
	req, _ = http.NewRequest(http.MethodGet, o.b.MgmtURL+"/api/definitions/"+url.PathEscape(o.vhost), nil)
	req.SetBasicAuth(o.b.User, o.b.Password)
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	export, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	os.WriteFile(file, export, 0o644)
	stdout, stderr, code = rmqtopo(t, "", "plan", "--against", file, "--detailed-exitcode", path)
	if code != 0 {
		t.Errorf("--against the vhost export: exit %d\n%s%s", code, stdout, stderr)
	}
	_, stderr, code = rmqtopo(t, "", "plan", "--against", "empty", "--out", filepath.Join(o.dir, "p.json"), path)
	if code != 1 || !strings.Contains(stderr, "--out needs a live broker") {
		t.Errorf("--against with --out: exit %d, %q", code, stderr)
	}
}

// TestOnlineKilledApplyConverges kills a real rmqtopo process with SIGKILL
// in the middle of a big apply; planning and applying again converges.
func TestOnlineKilledApplyConverges(t *testing.T) {
	t.Parallel()
	o := newOnline(t)
	bin := filepath.Join(o.dir, "rmqtopo")
	if out, err := exec.Command("go", "build", "-tags", "rmqtopo_testhooks", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var sb strings.Builder
	sb.WriteString("layout: per-attempt\nexchanges:\n  - {name: biz, type: topic}\nqueues:\n")
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&sb, "  - name: svc%03d\n    bindings: [{exchange: biz, routing_key: \"k.%d\"}]\n    retry: {exponential: {initial: 1s, factor: 2, attempts: 5}}\n", i, i)
	}
	path := o.spec(t, "big.yaml", sb.String())

	// The failpoint kills it once 1,000 of its ~3,200 changes are made,
	// however fast or slow the machine.
	cmd := exec.Command(bin, append([]string{"apply", "--auto-approve", path}, o.conn()...)...)
	cmd.Env = append(os.Environ(), failpoint.Env+"=changes:1000")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("apply was not killed by the failpoint (%v); stderr:\n%s", err, stderr.String())
	}
	o.must(t, 2, "plan", "--detailed-exitcode", path)

	// The killed apply's lock, an exclusive queue, goes once the broker
	// sees its connection closed: a moment later, longer on a busy machine.
	// The re-run waits for it, as an operator's would. The lock timeout is
	// a guard: apply re-tries the lock at most every 2 s, so a second or
	// two on a quiet machine; 6 s keeps the minute it had.
	out := o.must(t, 0, "apply", "--auto-approve", "--lock-timeout", waitguard.For(6*time.Second).String(), path)
	if !strings.Contains(out, "Apply complete") {
		t.Errorf("re-run:\n%s", out)
	}
	o.must(t, 0, "plan", "--detailed-exitcode", path)
}
