package clustertest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
)

// tlsEnv is a private node with TLS on AMQP (certificate for 127.0.0.1)
// and on the management API (certificate for localhost), and the files a
// client needs. Both verify a client certificate when given one; AMQP
// refuses a client without one, the management API does not, so that a
// missing certificate shows at the AMQP dial after a plan that worked.
type tlsEnv struct {
	node                  *brokertest.Node
	caCert                string // the CA of the node and of the client certificate
	otherCA               string // a CA that signed nothing the node presents
	clientCert, clientKey string
	mgmtURL, amqpsURL     string // https://localhost:P, amqps://guest:guest@127.0.0.1:P/
}

var (
	tlsOnce sync.Once
	tlsNode *tlsEnv
	tlsErr  error
)

// getTLS starts the TLS node on first use, once per test binary. The node
// is always private: its listeners are configured by the test, so
// RMQTOPO_TEST_URL does not replace it.
func getTLS(t testing.TB) *tlsEnv {
	t.Helper()
	tlsOnce.Do(func() { tlsNode, tlsErr = startTLS(t) })
	if tlsErr != nil {
		t.Fatalf("TLS node: %v", tlsErr)
	}
	return tlsNode
}

func startTLS(t testing.TB) (*tlsEnv, error) {
	dir, err := os.MkdirTemp("", "rmqtopo-tls-")
	if err != nil {
		return nil, err
	}
	c := newCA(t, dir, "ca")
	other := newCA(t, dir, "other-ca")
	amqpCert, amqpKey := c.issue(t, dir, "amqp-127.0.0.1", false, "127.0.0.1")
	mgmtCert, mgmtKey := c.issue(t, dir, "mgmt-localhost", false, "localhost")
	clientCert, clientKey := c.issue(t, dir, "client", true)
	name := "rmqtopo-tls-" + fmt.Sprint(os.Getpid()) + "@localhost"
	if p := os.Getenv(brokertest.EnvClusterName); p != "" {
		name = p + "tls@localhost"
	}
	// A hang guard of 3 minutes (unscaled) as before: the node boots beside
	// the cluster's three, in 5-10 s on a quiet machine (11 s at load 28).
	ctx, cancel := context.WithTimeout(context.Background(), waitguard.AtLeast(10*time.Second, 3*time.Minute))
	defer cancel()
	n, err := brokertest.StartNode(ctx, brokertest.NodeConfig{
		Name:          name,
		BaseDir:       dir,
		StatsInterval: brokertest.TestStatsInterval,
		TLS: &brokertest.TLSFiles{CACert: c.path, AMQPCert: amqpCert, AMQPKey: amqpKey,
			MgmtCert: mgmtCert, MgmtKey: mgmtKey, RequireClientCertAMQP: true},
	})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	brokertest.Own(n, dir)
	return &tlsEnv{node: n, caCert: c.path, otherCA: other.path, clientCert: clientCert, clientKey: clientKey,
		mgmtURL:  fmt.Sprintf("https://localhost:%d", n.MgmtTLSPort),
		amqpsURL: fmt.Sprintf("amqps://guest:guest@127.0.0.1:%d/", n.AMQPSPort)}, nil
}

// flags are the connection flags of the TLS node with mutual TLS.
func (e *tlsEnv) flags() []string {
	return []string{"--url", e.mgmtURL, "--amqp-url", e.amqpsURL, "--ca-cert", e.caCert,
		"--client-cert", e.clientCert, "--client-key", e.clientKey}
}

// TestTLSTwoHostNames plans and applies over TLS with the management API at
// https://localhost (certificate for localhost) and AMQP at
// amqps://127.0.0.1 (certificate for 127.0.0.1), mutual TLS on both.
func TestTLSTwoHostNames(t *testing.T) {
	t.Parallel() // a node of its own: beside the cluster tests
	e := getTLS(t)
	b := &brokertest.Broker{MgmtURL: e.node.MgmtURL(), AMQPURL: e.node.AMQPURL(), User: "guest", Password: "guest", Node: e.node}
	vhost := b.NewVhost(t)
	path := writeSpec(t, t.TempDir(), "s.yaml", vhost, clusterSpec)
	must(t, 2, append([]string{"plan", "--detailed-exitcode", path}, e.flags()...)...)
	must(t, 0, append([]string{"apply", "--auto-approve", path}, e.flags()...)...)
	must(t, 0, append([]string{"plan", "--detailed-exitcode", path}, e.flags()...)...)
}

// newTLSSpec makes a vhost on the TLS node (over its plain listener) and a
// spec for it.
func newTLSSpec(t *testing.T, e *tlsEnv) string {
	t.Helper()
	b := &brokertest.Broker{MgmtURL: e.node.MgmtURL(), AMQPURL: e.node.AMQPURL(), User: "guest", Password: "guest", Node: e.node}
	return writeSpec(t, t.TempDir(), "s.yaml", b.NewVhost(t), clusterSpec)
}

// oneError checks that a failed run printed exactly one line, an rmqtopo
// error containing every one of want.
func oneError(t *testing.T, r result, want ...string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if r.code != 1 || len(lines) != 1 || !strings.HasPrefix(lines[0], "rmqtopo: ") {
		t.Fatalf("want one error line and exit 1, got %s", r)
	}
	for _, w := range want {
		if !strings.Contains(lines[0], w) {
			t.Errorf("error lacks %q: %s", w, lines[0])
		}
	}
}

// TestTLSWrongCA verifies the broker with a CA that did not sign its
// certificates: one error, naming the cause, the URL and --ca-cert, from
// plan (the management API first) and from apply (the AMQP lock first).
func TestTLSWrongCA(t *testing.T) {
	t.Parallel() // a node of its own: beside the cluster tests
	e := getTLS(t)
	path := newTLSSpec(t, e)
	flags := e.flags()
	flags[5] = e.otherCA // the value of --ca-cert
	r := run(t, append([]string{"plan", path}, flags...)...)
	oneError(t, r, "certificate signed by unknown authority", "--ca-cert", e.mgmtURL)
	r = run(t, append([]string{"apply", "--auto-approve", path}, flags...)...)
	oneError(t, r, "certificate signed by unknown authority", "--ca-cert")
}

// TestTLSMissingClientCert applies without a client certificate to a broker
// whose AMQP listener requires one, 20 times: the refusal races the AMQP
// header over TLS 1.3, and the error must name the certificate and the
// flags every time, not a reset or closed connection.
func TestTLSMissingClientCert(t *testing.T) {
	t.Parallel() // a node of its own: beside the cluster tests
	e := getTLS(t)
	path := newTLSSpec(t, e)
	flags := []string{"--url", e.mgmtURL, "--amqp-url", e.amqpsURL, "--ca-cert", e.caCert}
	// The management API does not insist: plan works.
	must(t, 2, append([]string{"plan", "--detailed-exitcode", path}, flags...)...)
	for i := 0; i < 20; i++ {
		r := run(t, append([]string{"apply", "--auto-approve", path}, flags...)...)
		oneError(t, r, "client certificate", "--client-cert", "--client-key", "amqps://127.0.0.1:")
		if t.Failed() {
			t.Fatalf("run %d of 20", i+1)
		}
	}
}

// TestTLSPlainURLToTLSPort gives amqp:// for the AMQPS port: the error says
// the port speaks TLS and to use amqps://.
func TestTLSPlainURLToTLSPort(t *testing.T) {
	t.Parallel() // a node of its own: beside the cluster tests
	e := getTLS(t)
	path := newTLSSpec(t, e)
	flags := e.flags()
	flags[3] = strings.Replace(e.amqpsURL, "amqps://", "amqp://", 1) // the value of --amqp-url
	r := run(t, append([]string{"apply", "--auto-approve", path}, flags...)...)
	oneError(t, r, "speaks TLS", "use amqps://")
}
