package brokertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rabbithole "github.com/michaelklishin/rabbit-hole/v2"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/waitguard"
)

// Environment variables naming an external broker. When RMQTOPO_TEST_URL
// (management API, e.g. http://127.0.0.1:15672) and RMQTOPO_TEST_AMQP_URL
// (e.g. amqp://guest:guest@127.0.0.1:5672/) are both set, Get uses that
// broker instead of starting one. The user is RMQTOPO_TEST_USER /
// RMQTOPO_TEST_PASSWORD if set, else the AMQP URL's userinfo, else
// guest/guest; it must be allowed to create vhosts (administrator tag).
// RMQTOPO_TEST_NODE_STATE, which rabbitnode's env sets, names the
// external broker's node.json when it is a private node on this machine:
// the tests that need the node itself (rabbitmqctl eval, its log) then run
// against it instead of skipping.
const (
	EnvMgmtURL   = "RMQTOPO_TEST_URL"
	EnvAMQPURL   = "RMQTOPO_TEST_AMQP_URL"
	EnvUser      = "RMQTOPO_TEST_USER"
	EnvPassword  = "RMQTOPO_TEST_PASSWORD"
	EnvNodeState = "RMQTOPO_TEST_NODE_STATE"
)

// Broker is the broker a test binary's tests share.
type Broker struct {
	MgmtURL        string // http://127.0.0.1:PORT, no trailing slash
	AMQPURL        string // amqp://guest:guest@127.0.0.1:PORT/
	User, Password string
	// Node is the private node: the one the test binary started, or the
	// one RMQTOPO_TEST_NODE_STATE names (which the tests never stop); nil
	// for any other external broker.
	Node *Node
	// nodeShared is set when Node is one other test binaries use too.
	nodeShared bool
}

var (
	getOnce   sync.Once
	shared    *Broker
	sharedErr error
	mainUsed  bool
	ownedDir  string
	watchdogs []*exec.Cmd
)

// Main is the TestMain of every package using Get:
//
//	func TestMain(m *testing.M) { brokertest.Main(m) }
//
// It runs the tests, then kills the private node if Get started one and
// removes its directory, and exits with the tests' status. The node is
// killed, not stopped gracefully: its data is thrown away, and a graceful
// stop costs ~8s per test binary. Should the test binary die without
// returning here (panic, -timeout, signal), a watchdog process started with
// the node kills it and removes its directory.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main without the exit: it runs the tests, cleans up the private
// node if Get started one, and returns the tests' exit code. It is for a
// TestMain that composes with another harness that owns the exit, such as
// testscript.Main, which takes anything with a Run() int method:
//
//	type brokerM struct{ m *testing.M }
//
//	func (b brokerM) Run() int { return brokertest.Run(b.m) }
//
//	func TestMain(m *testing.M) { testscript.Main(brokerM{m}, commands) }
func Run(m *testing.M) int {
	mainUsed = true
	code := m.Run()
	cleanupCluster()
	cleanupOwned()
	if shared != nil && shared.Node != nil && ownedDir != "" {
		shared.Node.Kill()
		os.RemoveAll(ownedDir)
	}
	for _, w := range watchdogs {
		_ = w.Process.Kill()
	}
	return code
}

// Get returns the broker for this test binary: the external one named by
// RMQTOPO_TEST_URL and RMQTOPO_TEST_AMQP_URL, or else a private node started
// on first use (about 5s) under a temporary directory. It fails the test if
// no broker can be had; integration tests are never skipped.
func Get(t testing.TB) *Broker {
	t.Helper()
	getOnce.Do(func() { shared, sharedErr = setup() })
	if sharedErr != nil {
		t.Fatalf("brokertest: no broker: %v", sharedErr)
	}
	return shared
}

func setup() (*Broker, error) {
	mgmt, amqpURL := os.Getenv(EnvMgmtURL), os.Getenv(EnvAMQPURL)
	if mgmt != "" || amqpURL != "" {
		if mgmt == "" || amqpURL == "" {
			return nil, fmt.Errorf("set both %s (management API URL) and %s (AMQP URL), or neither to start a private node", EnvMgmtURL, EnvAMQPURL)
		}
		return external(mgmt, amqpURL)
	}
	if !mainUsed {
		return nil, errors.New("a private broker node needs cleanup: add `func TestMain(m *testing.M) { brokertest.Main(m) }` to the package's tests")
	}
	dir, err := os.MkdirTemp("", "rmqtopo-broker-")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupGuard())
	defer cancel()
	node, err := StartNode(ctx, NodeConfig{BaseDir: dir, StatsInterval: TestStatsInterval})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	ownedDir = dir
	startWatchdog(node, dir)
	return &Broker{
		MgmtURL:  node.MgmtURL(),
		AMQPURL:  node.AMQPURL(),
		User:     "guest",
		Password: "guest",
		Node:     node,
	}, nil
}

func external(mgmt, amqpURL string) (*Broker, error) {
	u, err := url.Parse(amqpURL)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvAMQPURL, err)
	}
	user, pass := "guest", "guest"
	if u.User != nil {
		user = u.User.Username()
		if p, ok := u.User.Password(); ok {
			pass = p
		}
	}
	if v := os.Getenv(EnvUser); v != "" {
		user = v
	}
	if v := os.Getenv(EnvPassword); v != "" {
		pass = v
	}
	node, err := attachNode(mgmt)
	if err != nil {
		return nil, err
	}
	return &Broker{
		MgmtURL:  strings.TrimRight(mgmt, "/"),
		AMQPURL:  amqpURL,
		User:     user,
		Password: pass,
		Node:     node,
		// A node named in the environment serves every test binary of
		// the run, make test's packages side by side.
		nodeShared: node != nil,
	}, nil
}

// attachNode reads the node RMQTOPO_TEST_NODE_STATE names, nil when it is
// unset. The node must be the broker at mgmt: a state file left from
// another node is an error, not a node to run rabbitmqctl against.
func attachNode(mgmt string) (*Node, error) {
	path := os.Getenv(EnvNodeState)
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvNodeState, err)
	}
	var n Node
	if err := json.Unmarshal(data, &n); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", EnvNodeState, path, err)
	}
	if n.MgmtURL() != strings.TrimRight(mgmt, "/") {
		return nil, fmt.Errorf("%s: %s records node %s at %s, not the broker at %s=%s", EnvNodeState, path, n.Name, n.MgmtURL(), EnvMgmtURL, mgmt)
	}
	return &n, nil
}

// startWatchdog starts a detached shell that kills the node and removes its
// directory once this process is gone, however it ended. After a normal
// Main the node is already dead and the directory gone; it then just exits.
func startWatchdog(n *Node, dir string) {
	pid, err := n.PID()
	if err != nil {
		return
	}
	script := `while kill -0 "$1" 2>/dev/null; do sleep 1; done; kill -9 "$2" 2>/dev/null; rm -rf "$3"`
	cmd := exec.Command("/bin/sh", "-c", script, "brokertest-watchdog",
		strconv.Itoa(os.Getpid()), strconv.Itoa(pid), dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err == nil {
		watchdogs = append(watchdogs, cmd)
		go cmd.Wait() // reap it if it ends while we live
	}
}

// Mgmt returns a management API client for the broker's user.
func (b *Broker) Mgmt(t testing.TB) *rabbithole.Client {
	t.Helper()
	c, err := rabbithole.NewClient(b.MgmtURL, b.User, b.Password)
	if err != nil {
		t.Fatalf("brokertest: management client for %s: %v", b.MgmtURL, err)
	}
	c.SetTimeout(mgmtTimeout())
	return c
}

// mgmtTimeout bounds a management API request of the harness. Creating or
// deleting a vhost takes well under a second on a quiet node, but the node
// does them one at a time, and with test binaries side by side on a busy
// 2-CPU machine (load 20) a vhost creation waited over 30s behind the
// others: a guard against a hung broker, not a timing goal, and never
// under the 2 minutes it was when that was seen.
func mgmtTimeout() time.Duration { return waitguard.AtLeast(time.Second, 2*time.Minute) }

// setupGuard bounds setting up the test binary's private node (Get) or
// cluster (GetCluster), a hang guard: a node boots in about 5 s on a
// quiet machine and three side by side in 10-15 s (24-29 s at load 28),
// but on a machine without RabbitMQ, installing it first (apt-get, as
// root) takes tens of seconds: 30 s is the need.
func setupGuard() time.Duration { return waitguard.For(30 * time.Second) }

// NewVhost creates a vhost of the test's own, named
// "t-<test name>-<random>", grants the broker's user full permissions in it,
// and deletes it when the test ends (closing any connections left in it).
func (b *Broker) NewVhost(t testing.TB) string {
	t.Helper()
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := "t-" + sanitize(t.Name()) + "-" + hex.EncodeToString(rnd[:])
	c := b.Mgmt(t)
	res, err := c.PutVhost(name, rabbithole.VhostSettings{Description: "rmqtopo test " + t.Name()})
	if err != nil {
		t.Fatalf("brokertest: creating vhost %q: %v", name, err)
	}
	res.Body.Close()
	t.Cleanup(func() {
		res, err := c.DeleteVhost(name)
		if err != nil {
			t.Logf("brokertest: deleting vhost %q: %v", name, err)
			return
		}
		res.Body.Close()
	})
	res, err = c.UpdatePermissionsIn(name, b.User, rabbithole.Permissions{Configure: ".*", Write: ".*", Read: ".*"})
	if err != nil {
		t.Fatalf("brokertest: permissions for %q in vhost %q: %v", b.User, name, err)
	}
	res.Body.Close()
	return name
}

func sanitize(s string) string {
	var sb strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.':
			sb.WriteRune(r)
		default:
			sb.WriteByte('_')
		}
		if sb.Len() >= 60 {
			break
		}
	}
	return sb.String()
}

// AMQPURLFor returns the AMQP URL of vhost with the broker's user; the vhost
// is path-escaped ("/" becomes %2F).
func (b *Broker) AMQPURLFor(vhost string) string {
	u, err := url.Parse(b.AMQPURL)
	if err != nil {
		// Validated in setup for external brokers; generated otherwise.
		panic(fmt.Sprintf("brokertest: bad AMQP URL %q: %v", b.AMQPURL, err))
	}
	if vhost == "" {
		vhost = "/"
	}
	u.User = url.UserPassword(b.User, b.Password)
	u.Path = "/" + vhost
	u.RawPath = "/" + url.PathEscape(vhost)
	return u.String()
}

// Dial opens an AMQP connection to vhost, closed when the test ends.
func (b *Broker) Dial(t testing.TB, vhost string) *amqp.Connection {
	t.Helper()
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName("brokertest " + t.Name())
	conn, err := amqp.DialConfig(b.AMQPURLFor(vhost), amqp.Config{
		Heartbeat:  10 * time.Second,
		Locale:     "en_US",
		Properties: props,
	})
	if err != nil {
		t.Fatalf("brokertest: dialing vhost %q: %v", vhost, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// QueueDepth returns the number of ready messages in queue, read with a
// passive queue declare over AMQP (immediate and exact, unlike the
// management API's periodically refreshed statistics). It fails the test if
// the queue does not exist.
func (b *Broker) QueueDepth(t testing.TB, vhost, queue string) int {
	t.Helper()
	conn := b.Dial(t, vhost)
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("brokertest: opening channel: %v", err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
	if err != nil {
		t.Fatalf("brokertest: passive declare of queue %q in vhost %q: %v", queue, vhost, err)
	}
	return q.Messages
}

// PublishConfirmed publishes msg on a fresh channel in confirm mode and
// waits for the broker's ack; it fails the test on a nack, a closed
// channel, or no ack within a hang guard (waitguard, 30 s unscaled: a
// confirm takes milliseconds). Unroutable messages are acked and dropped
// by the broker, as with any non-mandatory publish.
func PublishConfirmed(t testing.TB, conn *amqp.Connection, exchange, key string, msg amqp.Publishing) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("brokertest: opening channel: %v", err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		t.Fatalf("brokertest: confirm mode: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitguard.For(100*time.Millisecond))
	defer cancel()
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, false, false, msg)
	if err != nil {
		t.Fatalf("brokertest: publishing to exchange %q key %q: %v", exchange, key, err)
	}
	ok, err := dc.WaitContext(ctx)
	if err != nil {
		t.Fatalf("brokertest: waiting for confirm of publish to exchange %q key %q: %v", exchange, key, err)
	}
	if !ok {
		t.Fatalf("brokertest: broker nacked publish to exchange %q key %q", exchange, key)
	}
}

// Drain consumes exactly n messages from queue with manual acks (prefetch
// n, so no more than n are taken), acks them and returns them in delivery
// order. It fails the test if fewer than n arrive within timeout, a hang
// guard: callers size it with waitguard.For from what the drain needs on a
// quiet machine.
func Drain(t testing.TB, conn *amqp.Connection, queue string, n int, timeout time.Duration) []amqp.Delivery {
	t.Helper()
	if n <= 0 {
		return nil
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("brokertest: opening channel: %v", err)
	}
	defer ch.Close()
	if err := ch.Qos(n, 0, false); err != nil {
		t.Fatalf("brokertest: qos: %v", err)
	}
	const tag = "brokertest-drain"
	deliveries, err := ch.Consume(queue, tag, false, false, false, false, nil)
	if err != nil {
		t.Fatalf("brokertest: consuming from %q: %v", queue, err)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	got := make([]amqp.Delivery, 0, n)
	for len(got) < n {
		select {
		case d, ok := <-deliveries:
			if !ok {
				t.Fatalf("brokertest: draining %q: channel closed after %d of %d messages", queue, len(got), n)
			}
			if err := d.Ack(false); err != nil {
				t.Fatalf("brokertest: acking message from %q: %v", queue, err)
			}
			got = append(got, d)
		case <-timer.C:
			t.Fatalf("brokertest: draining %q: got %d of %d messages within %v", queue, len(got), n, timeout)
		}
	}
	_ = ch.Cancel(tag, false)
	return got
}

// Version is the broker's RabbitMQ version ("4.3.6"), as its management
// API reports it: for tests whose expectation depends on the release.
func (b *Broker) Version(t testing.TB) string {
	t.Helper()
	ov, err := b.Mgmt(t).Overview()
	if err != nil {
		t.Fatalf("brokertest: GET /api/overview: %v", err)
	}
	return ov.RabbitMQVersion
}
