// Command rabbitnode starts and stops the private RabbitMQ node that the
// Makefile's test, broker-start, broker-stop and demo targets use. It is a
// thin wrapper around package brokertest's Node.
//
// Usage:
//
//	rabbitnode start --dir DIR [--rabbitmq SERIES] [--default-ports] [--name NAME] [--stats-interval D]
//	rabbitnode stop --dir DIR [--keep-data]
//	rabbitnode status --dir DIR
//	rabbitnode root [--rabbitmq SERIES]
//	rabbitnode releases [--newest]
//
// releases prints the series the suite runs on (brokertest.Releases, from
// the release profiles), oldest first, or only the newest, the default:
// the Makefile and .ci/run read it.
//
// --rabbitmq picks the RabbitMQ release series, 3.10 (the host's package),
// 4.0 or 4.3 (each in a private root, built once and cached); default
// $RMQTOPO_TEST_RABBITMQ, else the newest. root builds the series' root if
// it is missing, with progress lines, and prints its path ("" for 3.10):
// make test runs it first, so that the build shows before any test.
//
// start starts a node under DIR (node directory DIR/<name>, Erlang cookie in
// DIR/home), records it in DIR/node.json, writes DIR/env and prints the same
// shell lines on stdout:
//
//	export RMQTOPO_TEST_URL=http://127.0.0.1:MGMT_PORT
//	export RMQTOPO_TEST_AMQP_URL=amqp://guest:guest@127.0.0.1:AMQP_PORT/
//	export RMQTOPO_TEST_NODE_STATE=/abs/DIR/node.json
//	export RMQTOPO_TEST_RABBITMQ=SERIES
//
// so that `eval "$(rabbitnode start --dir DIR)"` or `. DIR/env` points the
// tests at it. By default the node is named rmqtopo-make@localhost and listens
// on free ports picked at start. With --default-ports it is named
// rmqtopo-demo@localhost and listens on fixed ports, AMQP 127.0.0.1:5680,
// management http://127.0.0.1:15680 (Erlang distribution 25680), for the
// demo; 5672/15672 belong to the system broker. --name overrides the name.
// If DIR/node.json names a node of the same series that answers, start reuses it and only
// prints its environment; a recorded node that does not answer is killed
// and started afresh. --stats-interval sets the management statistics'
// refresh interval (RabbitMQ's default, 5s, without it); make test uses
// brokertest.TestStatsInterval.
//
// stop stops the node recorded in DIR/node.json gracefully (rabbitmqctl stop,
// about 8s; killed if that fails), then removes DIR/node.json, DIR/env and
// the node's data (its logs stay in DIR/<name>/log) unless --keep-data is
// given. With no node recorded it does nothing and exits 0.
//
// status prints the environment and exits 0 if the recorded node answers,
// else says so and exits 1.
//
// Progress and errors go to stderr; start's exit status is non-zero if the
// node could not be started, with the tail of its logs in the message.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	cmd, args := os.Args[1], os.Args[2:]
	if cmd == "releases" {
		releases(args)
		return
	}
	fl := flag.NewFlagSet("rabbitnode "+cmd, flag.ExitOnError)
	dir := fl.String("dir", "", "directory holding the node (required)")
	defaultPorts := fl.Bool("default-ports", false, "start: name rmqtopo-demo@localhost, AMQP 5680, management 15680, distribution 25680")
	name := fl.String("name", "", "start: node name (default rmqtopo-make@localhost, or rmqtopo-demo@localhost with --default-ports)")
	keepData := fl.Bool("keep-data", false, "stop: keep the node's data directory")
	stats := fl.Duration("stats-interval", 0, "start: management statistics interval (default RabbitMQ's, 5s)")
	series := fl.String("rabbitmq", os.Getenv(brokertest.EnvRabbitMQ), "start, root: RabbitMQ series, 3.10, 4.0 or 4.3 (default $"+brokertest.EnvRabbitMQ+", else "+brokertest.DefaultRelease+")")
	_ = fl.Parse(args)
	if *series == "" {
		*series = brokertest.DefaultRelease
	}
	if cmd == "root" {
		if err := root(*series); err != nil {
			fatal(err)
		}
		return
	}
	if *dir == "" || fl.NArg() != 0 {
		usage()
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		fatal(err)
	}
	// A hang guard on make test's node (5 minutes unscaled): it boots in
	// about 5 s and stops in about 8 s on a quiet machine, but on a machine
	// without RabbitMQ, start installs it first (apt-get, as root), which
	// takes tens of seconds: 30 s is the need, as for brokertest.Get's node.
	ctx, cancel := context.WithTimeout(context.Background(), waitguard.For(30*time.Second))
	defer cancel()
	switch cmd {
	case "start":
		err = start(ctx, abs, brokertest.NodeConfig{Name: *name, Series: *series, StatsInterval: *stats}, *defaultPorts)
	case "stop":
		err = stop(ctx, abs, *keepData)
	case "status":
		err = status(abs)
	default:
		usage()
	}
	if err != nil {
		fatal(err)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: rabbitnode start --dir DIR [--rabbitmq SERIES] [--default-ports] [--name NAME] [--stats-interval D]\n"+
		"       rabbitnode stop --dir DIR [--keep-data]\n       rabbitnode status --dir DIR\n       rabbitnode root [--rabbitmq SERIES]\n"+
		"       rabbitnode releases [--newest]")
	os.Exit(2)
}

// releases prints the series the suite runs on, one a line, oldest first
// (brokertest.Releases, from the release profiles); --newest prints the
// default, the newest. The Makefile and .ci/run read it.
func releases(args []string) {
	fl := flag.NewFlagSet("rabbitnode releases", flag.ExitOnError)
	newest := fl.Bool("newest", false, "print only the newest series, the default of make test")
	_ = fl.Parse(args)
	if fl.NArg() != 0 {
		usage()
	}
	for _, r := range brokertest.Releases {
		if !*newest || r.Series == brokertest.DefaultRelease {
			fmt.Println(r.Series)
		}
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "rabbitnode:", err)
	os.Exit(1)
}

func stateFile(dir string) string { return filepath.Join(dir, "node.json") }
func envFile(dir string) string   { return filepath.Join(dir, "env") }

// load returns the recorded node, or nil if there is none.
func load(dir string) (*brokertest.Node, error) {
	b, err := os.ReadFile(stateFile(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var n brokertest.Node
	if err := json.Unmarshal(b, &n); err != nil {
		return nil, fmt.Errorf("%s: %w", stateFile(dir), err)
	}
	return &n, nil
}

// envLines are the shell lines that point the tests at n, recorded in
// dir: its URLs, and its state file, with which the tests reach the node
// itself (rabbitmqctl, its log) as they do a node they started.
func envLines(n *brokertest.Node, dir string) string {
	state, err := filepath.Abs(stateFile(dir))
	if err != nil {
		state = stateFile(dir)
	}
	return fmt.Sprintf("export %s=%s\nexport %s=%s\nexport %s=%s\nexport %s=%s\n",
		brokertest.EnvMgmtURL, n.MgmtURL(), brokertest.EnvAMQPURL, n.AMQPURL(), brokertest.EnvNodeState, state,
		brokertest.EnvRabbitMQ, n.Series)
}

// answers reports whether the node's management API answers 200.
func answers(n *brokertest.Node) bool {
	if !n.Running() {
		return false
	}
	hc := &http.Client{Timeout: 3 * time.Second}
	req, _ := http.NewRequest(http.MethodGet, n.MgmtURL()+"/api/overview", nil)
	req.SetBasicAuth("guest", "guest")
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func start(ctx context.Context, dir string, cfg brokertest.NodeConfig, defaultPorts bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, err := load(dir)
	if err != nil {
		return err
	}
	if old != nil && old.Series != cfg.Series && old.Running() {
		fmt.Fprintf(os.Stderr, "rabbitnode: recorded node %s runs RabbitMQ %s, not %s; stopping it\n", old.Name, old.Series, cfg.Series)
		if err := old.Stop(ctx); err != nil {
			return err
		}
	}
	if old != nil {
		if answers(old) {
			fmt.Fprintf(os.Stderr, "rabbitnode: reusing running node %s (%s)\n", old.Name, old.MgmtURL())
			return publish(dir, old)
		}
		fmt.Fprintf(os.Stderr, "rabbitnode: recorded node %s does not answer; starting afresh\n", old.Name)
		old.Kill()
		if err := os.Remove(stateFile(dir)); err != nil {
			return err
		}
	}
	cfg.BaseDir = dir
	if defaultPorts {
		if cfg.Name == "" {
			cfg.Name = "rmqtopo-demo@localhost"
		}
		cfg.AMQPPort, cfg.MgmtPort, cfg.DistPort = 5680, 15680, 25680
	}
	if cfg.Name == "" {
		cfg.Name = "rmqtopo-make@localhost"
	}
	began := time.Now()
	fmt.Fprintf(os.Stderr, "rabbitnode: starting %s (RabbitMQ %s) under %s\n", cfg.Name, cfg.Series, dir)
	n, err := brokertest.StartNode(ctx, cfg)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(n, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(stateFile(dir), append(b, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "rabbitnode: %s ready in %.1fs: AMQP 127.0.0.1:%d, management %s (guest/guest)\n",
		n.Name, time.Since(began).Seconds(), n.AMQPPort, n.MgmtURL())
	return publish(dir, n)
}

// root builds the root of series if it is missing and prints its path.
func root(series string) error {
	r, err := brokertest.LookupRelease(series)
	if err != nil {
		return err
	}
	// EnsureRoot bounds the build itself with a hang guard.
	path, err := brokertest.EnsureRoot(context.Background(), r, os.Stderr)
	if err != nil {
		return err
	}
	fmt.Println(path)
	return nil
}

func publish(dir string, n *brokertest.Node) error {
	env := envLines(n, dir)
	if err := os.WriteFile(envFile(dir), []byte(env), 0o644); err != nil {
		return err
	}
	fmt.Print(env)
	return nil
}

func stop(ctx context.Context, dir string, keepData bool) error {
	n, err := load(dir)
	if err != nil {
		return err
	}
	if n == nil {
		fmt.Fprintf(os.Stderr, "rabbitnode: no node recorded in %s; nothing to stop\n", dir)
		return nil
	}
	fmt.Fprintf(os.Stderr, "rabbitnode: stopping %s\n", n.Name)
	stopErr := n.Stop(ctx)
	if n.Running() {
		return fmt.Errorf("node %s is still running: %v", n.Name, stopErr)
	}
	if stopErr != nil {
		fmt.Fprintln(os.Stderr, "rabbitnode:", stopErr)
	}
	for _, f := range []string{stateFile(dir), envFile(dir)} {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if !keepData {
		if err := os.RemoveAll(filepath.Join(n.Dir, "mnesia")); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "rabbitnode: stopped %s (logs in %s)\n", n.Name, filepath.Join(n.Dir, "log"))
	return nil
}

func status(dir string) error {
	n, err := load(dir)
	if err != nil {
		return err
	}
	if n == nil {
		fmt.Fprintf(os.Stderr, "rabbitnode: no node recorded in %s\n", dir)
		os.Exit(1)
	}
	if !answers(n) {
		fmt.Fprintf(os.Stderr, "rabbitnode: node %s recorded in %s does not answer\n", n.Name, dir)
		os.Exit(1)
	}
	fmt.Print(envLines(n, dir))
	return nil
}
