package brokertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Environment variables naming an external cluster for GetCluster: the
// management API URLs and the AMQP URLs of its nodes, comma-separated, in
// the same order (one of each per node). The user is taken as for Get
// (RMQTOPO_TEST_USER / RMQTOPO_TEST_PASSWORD, else the AMQP URLs'
// userinfo, else guest/guest). Tests that stop, kill or restart nodes skip
// on an external cluster: they only do that to nodes they started.
//
// RMQTOPO_TEST_CLUSTER_NAME sets the prefix of the private nodes' names
// ("PREFIXa@localhost", "PREFIXb@localhost", ...), so that checkouts on one
// machine can run cluster tests side by side; the default includes the
// test process's pid.
const (
	EnvClusterMgmtURLs = "RMQTOPO_TEST_CLUSTER_URLS"
	EnvClusterAMQPURLs = "RMQTOPO_TEST_CLUSTER_AMQP_URLS"
	EnvClusterName     = "RMQTOPO_TEST_CLUSTER_NAME"
)

// DeadLetterConfirmTimeout is the private cluster's
// dead_letter_worker_publisher_confirm_timeout: how long a quorum queue's
// at-least-once dead-letter worker waits for the target's confirm before it
// re-sends. RabbitMQ's default is 180s, which after a node loss makes
// retries that late; tests lower it to see the re-send within their time,
// and wait twice it for late duplicates: 2s, not more, as that wait is
// part of every storm (a confirm later than that is re-sent, a duplicate
// the tests count).
const DeadLetterConfirmTimeout = 2 * time.Second

// ClusterConfig describes a cluster of private nodes on this machine.
type ClusterConfig struct {
	// BaseDir holds every node's directory and their shared HOME (one
	// Erlang cookie). Required.
	BaseDir string
	// Size is the number of nodes; default 3.
	Size int
	// NamePrefix names the nodes PREFIXa@localhost, PREFIXb@localhost...
	// Default "rmqtopo-c<pid>".
	NamePrefix string
	// ExtraConf, AdvancedConfig and StatsInterval are given to every node
	// (NodeConfig).
	ExtraConf      []string
	AdvancedConfig string
	StatsInterval  time.Duration
}

// Cluster is a RabbitMQ cluster: the nodes this process started (nil for an
// external cluster) and a Broker per node, to reach each one directly.
type Cluster struct {
	Nodes   []*Node
	Brokers []*Broker
}

// External reports whether the cluster was given by the environment, in
// which case its nodes cannot be stopped or killed by the tests.
func (c *Cluster) External() bool { return c.Nodes == nil }

// StartCluster starts cfg.Size nodes side by side, each told the others'
// names (classic_config peer discovery), so that they cluster as they
// boot: since RabbitMQ 3.8.18 peer discovery takes a cluster-wide lock, so
// nodes booting together form one cluster, not two. A node that booted
// alone anyway is joined to the first (stop_app, join_cluster, start_app),
// as all of them were before, which cost about 7s a node one after the
// other. A cold 3-node cluster takes 15-25s on a loaded 2-vCPU machine. On
// failure the nodes started are killed.
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	if cfg.Size == 0 {
		cfg.Size = 3
	}
	if cfg.NamePrefix == "" {
		cfg.NamePrefix = fmt.Sprintf("rmqtopo-c%d", os.Getpid())
	}
	names := make([]string, cfg.Size)
	discovery := []string{"cluster_formation.peer_discovery_backend = classic_config"}
	for i := range names {
		names[i] = fmt.Sprintf("%s%c@localhost", cfg.NamePrefix, 'a'+i)
		discovery = append(discovery, fmt.Sprintf("cluster_formation.classic_config.nodes.%d = %s", i+1, names[i]))
	}
	nodes := make([]*Node, cfg.Size)
	errs := make([]error, cfg.Size)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() {
			nodes[i], errs[i] = StartNode(ctx, NodeConfig{
				Name:           names[i],
				BaseDir:        cfg.BaseDir,
				ExtraConf:      append(slices.Clone(discovery), cfg.ExtraConf...),
				AdvancedConfig: cfg.AdvancedConfig,
				StatsInterval:  cfg.StatsInterval,
			})
		})
	}
	wg.Wait()
	c := &Cluster{}
	for _, n := range nodes {
		if n != nil {
			c.Nodes = append(c.Nodes, n)
			c.Brokers = append(c.Brokers, nodeBroker(n))
		}
	}
	err := errors.Join(errs...)
	if err == nil {
		err = c.joinStrays(ctx)
	}
	if err == nil {
		err = c.waitQuorumReady(ctx)
	}
	if err != nil {
		c.Kill()
		return nil, err
	}
	return c, nil
}

// joinStrays joins to the first node every node that its management API
// does not list as a member: one that peer discovery left on its own.
func (c *Cluster) joinStrays(ctx context.Context) error {
	members, err := c.Brokers[0].clusterNodes(ctx)
	if err != nil {
		return err
	}
	for _, n := range c.Nodes[1:] {
		if slices.Contains(members, n.Name) {
			continue
		}
		if err := n.JoinCluster(ctx, c.Nodes[0]); err != nil {
			return err
		}
	}
	return nil
}

// waitQuorumReady waits until every node can start a quorum queue with a
// member on each node (Broker.WaitQuorumReady): the nodes that booted
// together are listed as running a while before that.
func (c *Cluster) waitQuorumReady(ctx context.Context) error {
	for _, b := range c.Brokers {
		if _, err := b.WaitQuorumReady(ctx, len(c.Brokers)); err != nil {
			return err
		}
	}
	return nil
}

// clusterNodes lists the names of the cluster's nodes, running or not, as
// b's management API sees them.
func (b *Broker) clusterNodes(ctx context.Context) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.MgmtURL+"/api/nodes?columns=name", nil)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth(b.User, b.Password)
	resp, err := (&http.Client{Timeout: mgmtTimeout()}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("brokertest: GET %s/api/nodes: %s", b.MgmtURL, resp.Status)
	}
	var nodes []struct {
		Name string `json:"name"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&nodes); err != nil {
		return nil, err
	}
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	return names, nil
}

func nodeBroker(n *Node) *Broker {
	return &Broker{MgmtURL: n.MgmtURL(), AMQPURL: n.AMQPURL(), User: "guest", Password: "guest", Node: n}
}

// Kill kills every node with SIGKILL.
func (c *Cluster) Kill() {
	for _, n := range c.Nodes {
		n.Kill()
	}
}

// Running returns the brokers of the nodes whose process is alive (all of
// them for an external cluster).
func (c *Cluster) Running() []*Broker {
	var out []*Broker
	for _, b := range c.Brokers {
		if b.Node == nil || b.Node.Running() {
			out = append(out, b)
		}
	}
	return out
}

var (
	clusterOnce sync.Once
	cluster     *Cluster
	clusterErr  error
	clusterSkip string
	clusterDir  string
)

// GetCluster returns this test binary's cluster: the external one named by
// RMQTOPO_TEST_CLUSTER_URLS and RMQTOPO_TEST_CLUSTER_AMQP_URLS, or else
// three private nodes started on first use under a temporary directory,
// clustered, with DeadLetterConfirmTimeout. It skips the test only when
// RabbitMQ is not installed and cannot be (the message says how to point
// the test at a cluster); any other failure fails the test. The package's
// TestMain must be Main or Run, which kill the nodes at the end.
func GetCluster(t testing.TB) *Cluster {
	t.Helper()
	clusterOnce.Do(func() { cluster, clusterSkip, clusterErr = setupCluster() })
	if clusterSkip != "" {
		t.Skip(clusterSkip)
	}
	if clusterErr != nil {
		t.Fatalf("brokertest: no cluster: %v", clusterErr)
	}
	return cluster
}

func setupCluster() (*Cluster, string, error) {
	mgmt, amqpURLs := os.Getenv(EnvClusterMgmtURLs), os.Getenv(EnvClusterAMQPURLs)
	if mgmt != "" || amqpURLs != "" {
		return externalCluster(mgmt, amqpURLs)
	}
	if !mainUsed {
		return nil, "", errors.New("a private cluster needs cleanup: add `func TestMain(m *testing.M) { brokertest.Main(m) }` to the package's tests")
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupGuard())
	defer cancel()
	if _, err := new(NodeConfig).install(ctx); err != nil {
		return nil, fmt.Sprintf("RabbitMQ cannot run here, so no private cluster: %v; or set %s and %s to an existing cluster's nodes",
			err, EnvClusterMgmtURLs, EnvClusterAMQPURLs), nil
	}
	dir, err := os.MkdirTemp("", "rmqtopo-cluster-")
	if err != nil {
		return nil, "", err
	}
	c, err := StartCluster(ctx, ClusterConfig{
		BaseDir:        dir,
		NamePrefix:     os.Getenv(EnvClusterName),
		StatsInterval:  TestStatsInterval,
		AdvancedConfig: fmt.Sprintf("[{rabbit, [{dead_letter_worker_publisher_confirm_timeout, %d}]}].\n", DeadLetterConfirmTimeout.Milliseconds()),
	})
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", err
	}
	clusterDir = dir
	for _, n := range c.Nodes {
		startWatchdog(n, dir)
	}
	return c, "", nil
}

func externalCluster(mgmt, amqpURLs string) (*Cluster, string, error) {
	ms, as := strings.Split(mgmt, ","), strings.Split(amqpURLs, ",")
	if mgmt == "" || amqpURLs == "" || len(ms) != len(as) {
		return nil, "", fmt.Errorf("set %s and %s to as many comma-separated URLs each (management API and AMQP, one of each per node), or neither to start a private cluster",
			EnvClusterMgmtURLs, EnvClusterAMQPURLs)
	}
	c := &Cluster{}
	for i := range ms {
		b, err := external(strings.TrimSpace(ms[i]), strings.TrimSpace(as[i]))
		if err != nil {
			return nil, "", err
		}
		c.Brokers = append(c.Brokers, b)
	}
	return c, "", nil
}

// cleanupCluster kills the private cluster, if GetCluster started one, and
// removes its directory.
func cleanupCluster() {
	if cluster == nil || cluster.External() {
		return
	}
	cluster.Kill()
	os.RemoveAll(clusterDir)
}

var (
	ownedMu    sync.Mutex
	ownedNodes []ownedNode
)

type ownedNode struct {
	n   *Node
	dir string
}

// Own hands a node a test started itself (say with TLS listeners) to Main
// or Run: when the tests end they kill it and remove dir, and a watchdog
// does the same if the test binary dies first.
func Own(n *Node, dir string) {
	ownedMu.Lock()
	defer ownedMu.Unlock()
	ownedNodes = append(ownedNodes, ownedNode{n, dir})
	startWatchdog(n, dir)
}

// cleanupOwned kills the nodes given to Own and removes their directories.
func cleanupOwned() {
	ownedMu.Lock()
	defer ownedMu.Unlock()
	for _, o := range ownedNodes {
		o.n.Kill()
		os.RemoveAll(o.dir)
	}
	ownedNodes = nil
}
