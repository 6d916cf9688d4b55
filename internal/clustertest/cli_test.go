package clustertest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rmqtopo/rmqtopo/internal/brokertest"
)

func TestMain(m *testing.M) {
	code := brokertest.Run(m)
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// nodes orders the tests that share the cluster: a test that kills or
// stops nodes holds it alone (killsNodes), tests that need every node up
// share it (needsNodes). The TLS tests, whose node is their own, take
// neither and run beside them, so the TLS node starts with the cluster.
var nodes sync.RWMutex

// killsNodes makes t a parallel test that runs alone among the cluster
// tests: it kills nodes, and restarts them before it ends.
func killsNodes(t *testing.T) {
	t.Parallel()
	nodes.Lock()
	t.Cleanup(nodes.Unlock)
}

// needsNodes makes t a parallel test that runs beside the others that need
// every node up, never while a test kills one.
func needsNodes(t *testing.T) {
	t.Parallel()
	nodes.RLock()
	t.Cleanup(nodes.RUnlock)
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// cli builds the rmqtopo binary once per test run and returns its path.
func cli(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "rmqtopo-clustertest-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "rmqtopo")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/rmqtopo/rmqtopo/cmd/rmqtopo").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// result is one run of the CLI.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// run runs the rmqtopo binary with args, in an environment without any
// RMQTOPO_* variable so that only the flags say where the broker is.
func run(t testing.TB, args ...string) result {
	t.Helper()
	cmd := exec.Command(cli(t), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RMQTOPO_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running rmqtopo: %v", err)
	}
	return result{out.String(), errb.String(), code}
}

// must runs the CLI and fails the test unless it exits with want.
func must(t testing.TB, want int, args ...string) result {
	t.Helper()
	r := run(t, args...)
	if r.code != want {
		t.Fatalf("rmqtopo %s: want exit %d, got %s", strings.Join(args, " "), want, r)
	}
	return r
}

// conn are the connection flags for one node.
func conn(b *brokertest.Broker) []string {
	return []string{"--url", b.MgmtURL, "--amqp-url", b.AMQPURL, "--user", b.User, "--password", b.Password}
}

// writeSpec writes a spec for vhost into dir and returns its path.
func writeSpec(t testing.TB, dir, name, vhost, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(fmt.Sprintf("version: 1\nvhost: %q\n%s", vhost, body)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
