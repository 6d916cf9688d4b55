// Package brokertest runs the RabbitMQ brokers that rmqtopo's integration
// tests talk to.
//
// rmqtopo reads and changes live broker topology, so its tests need a real
// RabbitMQ with the management plugin, one they may fill with vhosts, stop,
// restart or kill. The machine's system broker (5672/15672) is not fit for
// that: its management plugin may be off and tests must not disturb it.
// This package therefore starts private nodes from the Debian rabbitmq-server
// scripts, each with its own name, ports and directory, configured only
// through environment variables and a generated rabbitmq.conf (see
// StartNode). Several such nodes sharing one base directory (and so one
// HOME, one Erlang cookie) can form a cluster (see JoinCluster).
//
// Tests do not usually use Node directly: they call Get, which returns either
// the broker named by RMQTOPO_TEST_URL / RMQTOPO_TEST_AMQP_URL or one private
// node started once per test binary, and NewVhost to work in a vhost of their
// own.
package brokertest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rmqtopo/rmqtopo/internal/waitguard"
)

// DefaultBinDir is where Debian's rabbitmq-server package puts the real
// server scripts (/usr/sbin/rabbitmq-server is a wrapper that switches to the
// rabbitmq user and drops the environment, so it cannot be used).
// RMQTOPO_RABBITMQ_BIN_DIR overrides it.
const DefaultBinDir = "/usr/lib/rabbitmq/bin"

// Ports that belong to the system broker (and its CLI tools' distribution
// range); a private node never uses them.
var reservedPorts = map[int]bool{5672: true, 15672: true, 25672: true, 4369: true, 5680: true, 15680: true, 25680: true}

func isReserved(p int) bool { return reservedPorts[p] || (p >= 35672 && p <= 35682) }

// NodeConfig describes a private node to start.
type NodeConfig struct {
	// Name is the Erlang node name. Default "rmqtopo-test-<pid>@localhost".
	Name string
	// BaseDir holds the node's directory (BaseDir/<name before '@'>) and the
	// HOME shared by all nodes under BaseDir (BaseDir/home, where the Erlang
	// cookie lives). Nodes meant to cluster must share BaseDir. Required.
	BaseDir string
	// Ports; 0 picks a free port.
	AMQPPort, MgmtPort, DistPort int
	// ExtraConf lines are appended to the generated rabbitmq.conf.
	ExtraConf []string
	// AdvancedConfig, when not empty, is written to advanced.config (an
	// Erlang term list, e.g. to lower the rabbit app's
	// dead_letter_worker_publisher_confirm_timeout).
	AdvancedConfig string
	// TLS, when set, adds TLS listeners for AMQP and the management API
	// (on AMQPSPort and MgmtTLSPort) next to the plain ones, which the
	// harness keeps for its own readiness checks.
	TLS *TLSFiles
	// BinDir holds rabbitmq-server and rabbitmqctl. Default
	// $RMQTOPO_RABBITMQ_BIN_DIR, else DefaultBinDir. For a release run in
	// a private root it is the path inside the root, DefaultBinDir.
	BinDir string
	// Series is the RabbitMQ release series to start ("3.10", "4.0",
	// "4.3"; see Releases). Default $RMQTOPO_TEST_RABBITMQ, else
	// DefaultRelease.
	Series string
	// StartTimeout bounds the wait for the node to be ready, a hang guard.
	// Default waitguard.For(10s), 100 s unscaled: a node boots in about 5 s
	// on a quiet machine, three side by side (a cluster) in 10-15 s.
	StartTimeout time.Duration
	// StatsInterval, when not 0, is the management statistics' refresh
	// interval (collect_statistics_interval; RabbitMQ's default is 5s).
	// Test nodes use TestStatsInterval.
	StatsInterval time.Duration
	// Plugins are enabled besides rabbitmq_management, e.g.
	// "rabbitmq_shovel" and "rabbitmq_federation" (both ship with
	// RabbitMQ) for a blue-green move between two nodes.
	Plugins []string
}

// TestStatsInterval is the statistics interval of the nodes tests start:
// tests that wait for the management API's counts (status, plans that
// decide on counts) wait a second for them, not five.
const TestStatsInterval = time.Second

// TLSFiles are the PEM files of a node's TLS listeners. AMQP and the
// management API may present different certificates (say one for
// 127.0.0.1, one for localhost), signed by the same CA.
type TLSFiles struct {
	CACert            string // CA that signed the client certificates
	AMQPCert, AMQPKey string // presented on the AMQPS port
	MgmtCert, MgmtKey string // presented on the HTTPS port
	// The listeners verify a client certificate when one is given; these
	// make them also refuse a client without one (fail_if_no_peer_cert).
	RequireClientCertAMQP, RequireClientCertMgmt bool
	AMQPSPort, MgmtTLS                           int // 0 picks a free port
}

// Node is a private RabbitMQ node. Its exported fields are its whole state,
// so a Node saved as JSON by one process can be stopped by another.
type Node struct {
	Name     string `json:"name"`
	AMQPPort int    `json:"amqp_port"`
	MgmtPort int    `json:"mgmt_port"`
	DistPort int    `json:"dist_port"`
	// TLS listener ports; 0 when the node has none.
	AMQPSPort   int `json:"amqps_port,omitempty"`
	MgmtTLSPort int `json:"mgmt_tls_port,omitempty"`
	// Dir is the node's own directory: rabbitmq.conf, enabled_plugins, the
	// pid file, mnesia/ (data) and log/ (logs, <name>.log).
	Dir string `json:"dir"`
	// Home is the HOME of the node and of rabbitmqctl (Erlang cookie).
	Home   string `json:"home"`
	BinDir string `json:"bin_dir"`
	// Series is the node's RabbitMQ release series ("3.10", "4.3").
	Series string `json:"rabbitmq,omitempty"`
	// Root is the private root the node runs in (chroot, in a mount
	// namespace of its own); "" for the host's own RabbitMQ.
	Root         string        `json:"root,omitempty"`
	StartTimeout time.Duration `json:"start_timeout"`
}

// MgmtURL is the management API's base URL, http://127.0.0.1:PORT.
func (n *Node) MgmtURL() string { return fmt.Sprintf("http://127.0.0.1:%d", n.MgmtPort) }

// AMQPURL is the AMQP URL of the default vhost with the guest user.
func (n *Node) AMQPURL() string { return fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", n.AMQPPort) }

// PIDFile is the file the node writes its OS pid to.
func (n *Node) PIDFile() string { return filepath.Join(n.Dir, "rabbitmq.pid") }

// LogFile is the node's main log.
func (n *Node) LogFile() string { return filepath.Join(n.Dir, "log", n.Name+".log") }

// StartNode creates the node's directory and configuration, starts the node
// and waits until rabbitmqctl await_startup succeeds and the management API
// answers. On failure the error includes the tail of the node's log.
func StartNode(ctx context.Context, cfg NodeConfig) (*Node, error) {
	if cfg.BaseDir == "" {
		return nil, errors.New("brokertest: NodeConfig.BaseDir is required")
	}
	base, err := filepath.Abs(cfg.BaseDir)
	if err != nil {
		return nil, err
	}
	if cfg.Name == "" {
		cfg.Name = fmt.Sprintf("rmqtopo-test-%d@localhost", os.Getpid())
	}
	short, _, ok := strings.Cut(cfg.Name, "@")
	if !ok || short == "" {
		return nil, fmt.Errorf("brokertest: node name %q must look like name@host", cfg.Name)
	}
	root, err := cfg.install(ctx)
	if err != nil {
		return nil, err
	}
	if cfg.StartTimeout == 0 {
		// A node in a root boots in about 20 s, one of the host in 5.
		cfg.StartTimeout = waitguard.For(10 * time.Second)
		if root != "" {
			cfg.StartTimeout = waitguard.For(25 * time.Second)
		}
	}
	// A port picked here may still be taken by another process before the
	// node listens on it (start finds it in use, or the boot fails
	// eaddrinuse): then the node is set up again on other ports.
	for attempt := 1; ; attempt++ {
		n, err := newNode(cfg, base, short, root)
		if err != nil {
			return nil, err
		}
		err = n.start(ctx)
		if errors.Is(err, errPortTaken) && cfg.picksPorts() && attempt < 3 {
			log.Printf("brokertest: %v; trying other ports", firstLine(err))
			continue
		}
		if err != nil {
			return nil, err
		}
		return n, nil
	}
}

// install resolves cfg's release: it fills Series and BinDir, makes sure
// the release's server is there (the host's package, or a private root,
// built once) and returns the root ("" for the host).
func (cfg *NodeConfig) install(ctx context.Context) (string, error) {
	if cfg.Series == "" {
		r, err := ReleaseFromEnv()
		if err != nil {
			return "", err
		}
		cfg.Series = r.Series
	}
	r, err := LookupRelease(cfg.Series)
	if err != nil {
		return "", err
	}
	cfg.Series = r.Series
	if r.Suite != "" {
		cfg.BinDir = DefaultBinDir
		root, err := EnsureRoot(ctx, r, os.Stderr)
		if err == nil {
			startHostEPMD()
		}
		return root, err
	}
	if cfg.BinDir == "" {
		cfg.BinDir = os.Getenv("RMQTOPO_RABBITMQ_BIN_DIR")
	}
	if cfg.BinDir == "" {
		cfg.BinDir = DefaultBinDir
	}
	return "", ensureInstalled(ctx, cfg.BinDir)
}

// startHostEPMD starts the host's epmd if it has one and none runs: a
// node in a root would otherwise start its own, which then keeps the
// node's mount namespace alive after the node.
func startHostEPMD() {
	if dialable(4369) {
		return
	}
	if path, err := exec.LookPath("epmd"); err == nil {
		_ = exec.Command(path, "-daemon").Run()
	}
}

// picksPorts reports whether every port of the node is left to StartNode.
func (cfg NodeConfig) picksPorts() bool {
	given := cfg.AMQPPort | cfg.MgmtPort | cfg.DistPort
	if cfg.TLS != nil {
		given |= cfg.TLS.AMQPSPort | cfg.TLS.MgmtTLS
	}
	return given == 0
}

// newNode picks the node's free ports (those cfg leaves 0) and writes its
// configuration.
func newNode(cfg NodeConfig, base, short, root string) (*Node, error) {
	want := []int{cfg.AMQPPort, cfg.MgmtPort, cfg.DistPort}
	if cfg.TLS != nil {
		want = append(want, cfg.TLS.AMQPSPort, cfg.TLS.MgmtTLS)
	}
	ports, err := freePorts(want...)
	if err != nil {
		return nil, err
	}
	n := &Node{
		Name:         cfg.Name,
		AMQPPort:     ports[0],
		MgmtPort:     ports[1],
		DistPort:     ports[2],
		Dir:          filepath.Join(base, short),
		Home:         filepath.Join(base, "home"),
		BinDir:       cfg.BinDir,
		Series:       cfg.Series,
		Root:         root,
		StartTimeout: cfg.StartTimeout,
	}
	extra, advanced := cfg.ExtraConf, cfg.AdvancedConfig
	if cfg.StatsInterval > 0 {
		extra = append([]string{fmt.Sprintf("collect_statistics_interval = %d", cfg.StatsInterval.Milliseconds())}, extra...)
	}
	if cfg.TLS != nil {
		n.AMQPSPort, n.MgmtTLSPort = ports[3], ports[4]
		tls, err := n.copyTLS(cfg.TLS)
		if err != nil {
			return nil, err
		}
		extra = append(tlsConf(tls, n.AMQPSPort, n.MgmtTLSPort), extra...)
	}
	return n, n.writeFiles(extra, advanced, cfg.Plugins)
}

// copyTLS copies the node's PEM files into its directory, where a node in
// a private root sees them too (the root sees only the node's directories).
func (n *Node) copyTLS(t *TLSFiles) (*TLSFiles, error) {
	dir := filepath.Join(n.Dir, "tls")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	c := *t
	for _, f := range []*string{&c.CACert, &c.AMQPCert, &c.AMQPKey, &c.MgmtCert, &c.MgmtKey} {
		b, err := os.ReadFile(*f)
		if err != nil {
			return nil, err
		}
		dst := filepath.Join(dir, filepath.Base(*f))
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			return nil, err
		}
		*f = dst
	}
	return &c, nil
}

// tlsConf is the rabbitmq.conf of the TLS listeners.
func tlsConf(t *TLSFiles, amqps, mgmt int) []string {
	out := []string{
		fmt.Sprintf("listeners.ssl.default = 127.0.0.1:%d", amqps),
		"ssl_options.cacertfile = " + t.CACert,
		"ssl_options.certfile = " + t.AMQPCert,
		"ssl_options.keyfile = " + t.AMQPKey,
		fmt.Sprintf("management.ssl.port = %d", mgmt),
		"management.ssl.ip = 127.0.0.1",
		"management.ssl.cacertfile = " + t.CACert,
		"management.ssl.certfile = " + t.MgmtCert,
		"management.ssl.keyfile = " + t.MgmtKey,
	}
	return append(out,
		"ssl_options.verify = verify_peer",
		fmt.Sprintf("ssl_options.fail_if_no_peer_cert = %t", t.RequireClientCertAMQP),
		"management.ssl.verify = verify_peer",
		fmt.Sprintf("management.ssl.fail_if_no_peer_cert = %t", t.RequireClientCertMgmt))
}

func (n *Node) writeFiles(extra []string, advanced string, plugins []string) error {
	for _, d := range []string{n.Home, filepath.Join(n.Dir, "mnesia"), filepath.Join(n.Dir, "log")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := ensureCookie(n.Home); err != nil {
		return err
	}
	conf := fmt.Sprintf(`# Generated by rmqtopo's brokertest for node %s.
listeners.tcp.default = 127.0.0.1:%d
management.tcp.port = %d
management.tcp.ip = 127.0.0.1
loopback_users = none
`, n.Name, n.AMQPPort, n.MgmtPort)
	for _, l := range extra {
		conf += l + "\n"
	}
	if err := os.WriteFile(filepath.Join(n.Dir, "rabbitmq.conf"), []byte(conf), 0o644); err != nil {
		return err
	}
	if advanced != "" {
		if err := os.WriteFile(filepath.Join(n.Dir, "advanced.config"), []byte(advanced), 0o644); err != nil {
			return err
		}
	}
	enabled := "[" + strings.Join(append([]string{"rabbitmq_management"}, plugins...), ",") + "].\n"
	return os.WriteFile(filepath.Join(n.Dir, "enabled_plugins"), []byte(enabled), 0o644)
}

// ensureCookie writes the Erlang cookie before any node or CLI tool starts,
// so that nodes started together cannot race to create different cookies.
func ensureCookie(home string) error {
	path := filepath.Join(home, ".erlang.cookie")
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	b := make([]byte, 20)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	for i := range b {
		b[i] = 'A' + b[i]%26
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o400)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Env is the environment for the node's scripts and for rabbitmqctl: the
// current environment without any RABBITMQ_* or ERL_* variables, plus the
// node's own.
func (n *Node) Env() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "RABBITMQ_") || strings.HasPrefix(k, "ERL_") || k == "HOME" {
			continue
		}
		env = append(env, kv)
	}
	if n.Root != "" {
		// Elixir's CLI tools (4.x) want a UTF-8 locale; the root has C.UTF-8.
		env = append(env, "LC_ALL=C.UTF-8")
	}
	return append(env,
		"HOME="+n.Home,
		"RABBITMQ_NODENAME="+n.Name,
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT="+strconv.Itoa(n.AMQPPort),
		"RABBITMQ_DIST_PORT="+strconv.Itoa(n.DistPort),
		"RABBITMQ_BASE="+n.Dir,
		"RABBITMQ_MNESIA_BASE="+filepath.Join(n.Dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(n.Dir, "log"),
		"RABBITMQ_PID_FILE="+n.PIDFile(),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(n.Dir, "rabbitmq"),
		"RABBITMQ_ADVANCED_CONFIG_FILE="+filepath.Join(n.Dir, "advanced.config"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(n.Dir, "enabled_plugins"),
		"ERL_CRASH_DUMP="+filepath.Join(n.Dir, "log", "erl_crash.dump"),
	)
}

// Ctl runs rabbitmqctl -n NAME args... with the node's environment and
// returns its combined output.
func (n *Node) Ctl(ctx context.Context, args ...string) ([]byte, error) {
	out, err := n.command(ctx, "rabbitmqctl", append([]string{"-n", n.Name}, args...)...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("rabbitmqctl %s: %w\n%s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return out, nil
}

// command runs one of the node's scripts (rabbitmq-server, rabbitmqctl)
// with the node's environment: directly for the host's RabbitMQ, else
// chrooted into the node's root with its directories mounted at the same
// paths, so that every path in its environment and configuration holds.
func (n *Node) command(ctx context.Context, script string, args ...string) *exec.Cmd {
	argv := append([]string{filepath.Join(n.BinDir, script)}, args...)
	var cmd *exec.Cmd
	if n.Root == "" {
		cmd = exec.CommandContext(ctx, argv[0], argv[1:]...)
	} else {
		cmd = exec.CommandContext(ctx, "unshare", inRoot(n.Root, []string{n.Dir, n.Home}, argv...)...)
	}
	cmd.Env = n.Env()
	cmd.Dir = n.Dir
	return cmd
}

// errPortTaken is start's error for a port of the node already in use.
var errPortTaken = errors.New("is in use")

// start launches the server detached and waits until it is ready.
func (n *Node) start(ctx context.Context) error {
	for _, p := range n.ports() {
		if !portFree(p) {
			return fmt.Errorf("brokertest: cannot start %s: port %d %w%s", n.Name, p, errPortTaken, portHolders(p))
		}
	}
	// A stale pid file would make readiness checks look at a dead process.
	_ = os.Remove(n.PIDFile())
	// The server script runs in the foreground (not -detached) in a session
	// of its own, so that it outlives this process but a boot failure is seen
	// at once (the script exits) and its output, which explains failures that
	// happen before the log file exists, lands in log/startup.log.
	out, err := os.Create(n.StartupLogFile())
	if err != nil {
		return err
	}
	cmd := n.command(context.Background(), "rabbitmq-server")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		out.Close()
		return n.startErr(err)
	}
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		out.Close()
		if err == nil {
			err = errors.New("exit status 0")
		}
		exited <- err
	}()
	ctx, cancel := context.WithTimeout(ctx, n.StartTimeout)
	defer cancel()
	if err := n.waitReady(ctx, exited); err != nil {
		n.Kill()
		// Another process took a port between the check above and the
		// node's listening on it (a boot takes seconds): StartNode
		// tries other ports. Seen on make test's node beside the
		// cluster's, which other test binaries start at the same time.
		if b, _ := os.ReadFile(n.StartupLogFile()); bytes.Contains(b, []byte("eaddrinuse")) {
			err = fmt.Errorf("a port %w: %w", errPortTaken, err)
		}
		return n.startErr(err)
	}
	return nil
}

// portHolders lists the sockets on port p and their processes (ss -tanp),
// for an error saying that p is in use; "" where ss cannot tell.
func portHolders(p int) string {
	out, err := exec.Command("ss", "-tanp", fmt.Sprintf("( sport = :%d )", p)).Output()
	if err != nil || len(bytes.TrimSpace(out)) == 0 {
		return ""
	}
	return "; ss -tanp:\n" + strings.TrimSpace(string(out))
}

// ports are the ports the node listens on.
func (n *Node) ports() []int {
	out := []int{n.AMQPPort, n.MgmtPort, n.DistPort}
	if n.AMQPSPort != 0 {
		out = append(out, n.AMQPSPort, n.MgmtTLSPort)
	}
	return out
}

func (n *Node) portsFree() bool {
	for _, p := range n.ports() {
		if !portFree(p) {
			return false
		}
	}
	return true
}

// StartupLogFile holds the output of the server script (of its last start).
func (n *Node) StartupLogFile() string { return filepath.Join(n.Dir, "log", "startup.log") }

func (n *Node) startErr(err error) error {
	return fmt.Errorf("brokertest: starting node %s (dir %s) failed: %w\n"+
		"--- first errors in %s ---\n%s\n--- last lines of %s ---\n%s\n--- last lines of %s ---\n%s",
		n.Name, n.Dir, err,
		n.StartupLogFile(), firstErrors(n.StartupLogFile(), 8),
		n.StartupLogFile(), tailFile(n.StartupLogFile(), 15),
		n.LogFile(), n.LogTail(30))
}

// waitReady waits for the pid file, then for rabbitmqctl await_startup, then
// for the management API, failing early if the OS process dies.
func (n *Node) waitReady(ctx context.Context, exited <-chan error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case err := <-exited:
			cancel(fmt.Errorf("rabbitmq-server exited: %w", err))
		case <-ctx.Done():
		}
	}()
	err := n.waitReadySteps(ctx)
	if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
		return c
	}
	return err
}

func (n *Node) waitReadySteps(ctx context.Context) error {
	// await_startup fails at once while the node is not yet registered with
	// epmd, so first wait for the pid file, which the node writes early.
	var pid int
	for {
		if p, err := n.PID(); err == nil {
			pid = p
			break
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return fmt.Errorf("no pid file %s: %w", n.PIDFile(), err)
		}
	}
	// Each rabbitmqctl run boots an Erlang VM (~0.4s), so only call it once
	// the node listens on its distribution port.
	for !dialable(n.DistPort) {
		if !alive(pid) {
			return fmt.Errorf("node process %d exited during startup", pid)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return fmt.Errorf("distribution port %d not listening: %w", n.DistPort, err)
		}
	}
	for {
		if !alive(pid) {
			return fmt.Errorf("node process %d exited during startup", pid)
		}
		// A bound of one try, not a guard: a try that times out is
		// tried again until ctx (StartTimeout) ends.
		_, err := n.Ctl(ctx, "await_startup", "--timeout", "60")
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("await_startup: %w", err)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	return n.waitMgmt(ctx, pid)
}

// waitMgmt polls GET /api/overview until it answers 200: the management
// plugin starts listening a little after the rabbit application.
func (n *Node) waitMgmt(ctx context.Context, pid int) error {
	// A bound of one poll, not a guard: a request that times out is made
	// again until ctx ends.
	hc := &http.Client{Timeout: 2 * time.Second}
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.MgmtURL()+"/api/overview", nil)
		req.SetBasicAuth("guest", "guest")
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		if pid > 0 && !alive(pid) {
			return fmt.Errorf("node process %d exited while waiting for the management API", pid)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return fmt.Errorf("management API %s not ready (last: %s): %w", n.MgmtURL(), last, err)
		}
	}
}

// PID reads the node's OS pid from its pid file.
func (n *Node) PID() (int, error) {
	b, err := os.ReadFile(n.PIDFile())
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("bad pid file %s: %q", n.PIDFile(), b)
	}
	return pid, nil
}

// Running reports whether the node's OS process is alive.
func (n *Node) Running() bool {
	pid, err := n.PID()
	return err == nil && alive(pid)
}

// Stop stops the node gracefully with rabbitmqctl stop (which waits for the
// process to exit; about 8s on 3.10 because the management agent waits 5s
// for its statistics collector) and kills it through its pid file if that
// fails. Stopping a node that is not running is not an error. The node's
// directory is kept; Restart starts it again with its data.
func (n *Node) Stop(ctx context.Context) error {
	pid, err := n.PID()
	if err != nil || !alive(pid) {
		return nil
	}
	_, stopErr := n.Ctl(ctx, "stop", n.PIDFile())
	// A hang guard. When rabbitmqctl stop succeeds the process is gone
	// already; when the CLI fails, the node may still be stopping, which
	// takes about 8 s on a quiet machine.
	deadline := waitguard.Deadline(8 * time.Second)
	for alive(pid) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	if alive(pid) {
		n.Kill()
		if stopErr == nil {
			stopErr = errors.New("node did not exit after rabbitmqctl stop")
		}
		return fmt.Errorf("brokertest: graceful stop of %s failed, killed pid %d: %w", n.Name, pid, stopErr)
	}
	return nil
}

// Kill kills the node's Erlang VM with SIGKILL, as a crash would, and waits
// for it to be gone (bounded by a hang guard, 30 s unscaled: it takes
// milliseconds). Its data stays; Restart recovers it.
func (n *Node) Kill() {
	pid, err := n.PID()
	if err != nil || !alive(pid) {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	deadline := waitguard.Deadline(100 * time.Millisecond)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
}

// Restart stops the node if it is running (gracefully), then starts it again
// with the same name, ports and data, and waits until it is ready.
func (n *Node) Restart(ctx context.Context) error {
	if err := n.Stop(ctx); err != nil {
		return err
	}
	// Wait for the OS to release the listening ports: at once, as a rule,
	// once the process is gone; a hang guard.
	deadline := waitguard.Deadline(100 * time.Millisecond)
	for time.Now().Before(deadline) && !n.portsFree() {
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	return n.start(ctx)
}

// JoinCluster makes n a member of seed's cluster: stop_app, join_cluster,
// start_app, then waits for n to be ready again. n's data is discarded by
// RabbitMQ. Both nodes must share the Erlang cookie (same BaseDir in
// NodeConfig, hence the same Home).
func (n *Node) JoinCluster(ctx context.Context, seed *Node) error {
	if n.Home != seed.Home {
		a, _ := os.ReadFile(filepath.Join(n.Home, ".erlang.cookie"))
		b, _ := os.ReadFile(filepath.Join(seed.Home, ".erlang.cookie"))
		if !bytes.Equal(a, b) {
			return fmt.Errorf("brokertest: %s and %s have different Erlang cookies (%s, %s); start them with the same BaseDir",
				n.Name, seed.Name, n.Home, seed.Home)
		}
	}
	for _, args := range [][]string{{"stop_app"}, {"join_cluster", seed.Name}, {"start_app"}} {
		if _, err := n.Ctl(ctx, args...); err != nil {
			return fmt.Errorf("brokertest: %s joining %s: %w", n.Name, seed.Name, err)
		}
	}
	// A hang guard on the rabbit app's boot in the running VM (seconds on
	// a quiet machine), never under the 60 s it was.
	awaitSecs := strconv.Itoa(int(waitguard.AtLeast(5*time.Second, time.Minute).Seconds()))
	if _, err := n.Ctl(ctx, "await_startup", "--timeout", awaitSecs); err != nil {
		return fmt.Errorf("brokertest: %s after joining %s: %w", n.Name, seed.Name, err)
	}
	pid, _ := n.PID()
	return n.waitMgmt(ctx, pid)
}

// LogTail returns the last lines of the node's log (or a note saying why
// there is none).
func (n *Node) LogTail(lines int) string { return tailFile(n.LogFile(), lines) }

// firstErrors returns the first lines of a log marked [error]: the cause of
// a boot failure comes first, the crash reports follow.
func firstErrors(path string, max int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "[error]") && len(out) < max {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func tailFile(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return lastLines(string(b), lines)
}

func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	// A zombie still answers signal 0; it is not a running node.
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'Z' {
			return false
		}
	}
	return true
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func dialable(p int) bool {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", p), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func portFree(p int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// handedOut holds every port freePorts has picked in this process: a port
// is never picked twice, so nodes started side by side (a cluster, the TLS
// node) cannot pick each other's before they listen on them.
var (
	handedOutMu sync.Mutex
	handedOut   = map[int]bool{}
)

// freePorts returns the given ports, replacing each 0 with a distinct free
// port, not picked before by this process, that is not one of the system
// broker's.
func freePorts(want ...int) ([]int, error) {
	handedOutMu.Lock()
	defer handedOutMu.Unlock()
	out := make([]int, len(want))
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for i, p := range want {
		if p != 0 {
			out[i] = p
			continue
		}
		for tries := 0; ; tries++ {
			// Below the ephemeral range: a port the kernel hands out
			// for :0 is also one it may give an outgoing connection
			// (another test's, the cluster's) between this pick and
			// the node's start, which then fails "port in use".
			port := 20000 + mrand.IntN(ephemeralLow()-20000)
			if !handedOut[port] && !isReserved(port) {
				if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
					held = append(held, l)
					handedOut[port] = true
					out[i] = port
					break
				}
			}
			if tries > 200 {
				return nil, errors.New("brokertest: could not pick a free port")
			}
		}
	}
	return out, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux:
// net.ipv4.ip_local_port_range), 32768 where it cannot be read.
func ephemeralLow() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	var low, high int
	if _, err := fmt.Sscan(string(data), &low, &high); err != nil || low <= 21000 {
		return 32768
	}
	return low
}

var installMu sync.Mutex

// ensureInstalled installs Debian's rabbitmq-server when its scripts are
// missing and we are root. The package's postinst may start a system broker
// on 5672; private nodes do not use it.
func ensureInstalled(ctx context.Context, binDir string) error {
	server := filepath.Join(binDir, "rabbitmq-server")
	if _, err := os.Stat(server); err == nil {
		return nil
	}
	installMu.Lock()
	defer installMu.Unlock()
	if _, err := os.Stat(server); err == nil {
		return nil
	}
	if os.Geteuid() != 0 || binDir != DefaultBinDir {
		return fmt.Errorf("brokertest: %s not found. Install RabbitMQ (Debian/Ubuntu: apt-get install rabbitmq-server; "+
			"or set RMQTOPO_RABBITMQ_BIN_DIR to a directory holding rabbitmq-server and rabbitmqctl), "+
			"or point the tests at a running broker with management plugin: "+
			"RMQTOPO_TEST_URL=http://HOST:15672 RMQTOPO_TEST_AMQP_URL=amqp://USER:PASS@HOST:5672/", server)
	}
	if err := installDebian(ctx, "rabbitmq-server", func() bool { _, err := os.Stat(server); return err == nil }); err != nil {
		return err
	}
	if _, err := os.Stat(server); err != nil {
		return fmt.Errorf("brokertest: rabbitmq-server installed but %s is missing: %w", server, err)
	}
	return nil
}

// EnsureDebianPackage installs Debian's pkg with apt-get unless have
// reports it there already, for the tests that run a real client of
// another language (make test installs what it needs). Only root can; the
// error says so, and the test may then skip.
func EnsureDebianPackage(ctx context.Context, pkg string, have func() bool) error {
	if have() {
		return nil
	}
	installMu.Lock()
	defer installMu.Unlock()
	if os.Geteuid() != 0 {
		return fmt.Errorf("brokertest: Debian's %s is missing, and only root installs it (apt-get install %s)", pkg, pkg)
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("brokertest: %s is missing and there is no apt-get to install it: %w", pkg, err)
	}
	return installDebian(ctx, pkg, have)
}

// installDebian installs pkg with apt-get, unless have holds once it holds
// a lock shared with other test binaries installing at the same time. It
// tries the package lists as they are first, and updates them only if
// that fails.
func installDebian(ctx context.Context, pkg string, have func() bool) error {
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "rmqtopo-brokertest-install.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if have() {
		return nil
	}
	apt := func(args ...string) error {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("brokertest: apt-get %s: %w\n%s", strings.Join(args, " "), err, lastLines(string(out), 20))
		}
		return nil
	}
	if apt("install", "-y", pkg) == nil {
		return nil
	}
	if err := apt("update"); err != nil {
		return err
	}
	return apt("install", "-y", pkg)
}

// firstLine is err's message up to its first newline.
func firstLine(err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return msg
}

func lastLines(s string, n int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > n {
		parts = parts[len(parts)-n:]
	}
	return strings.Join(parts, "\n")
}
