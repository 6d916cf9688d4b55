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
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
