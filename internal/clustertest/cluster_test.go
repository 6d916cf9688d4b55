package clustertest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
)

// getJSON GETs a management API path from b into dst.
func getJSON(t testing.TB, b *brokertest.Broker, path string, dst any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.MgmtURL+path, nil)
	req.SetBasicAuth(b.User, b.Password)
	// A guard: a management API answers in milliseconds, a node just
	// restarted in about a second.
	resp, err := (&http.Client{Timeout: waitguard.For(time.Second)}).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s%s: %s", b.MgmtURL, path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(dst); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// TestClusterForms checks the harness: every node of the cluster sees all
// of them running.
func TestClusterForms(t *testing.T) {
	needsNodes(t)
	c := brokertest.GetCluster(t)
	for _, b := range c.Brokers {
		var nodes []struct {
			Name    string `json:"name"`
			Running bool   `json:"running"`
		}
		getJSON(t, b, "/api/nodes?columns=name,running", &nodes)
		running := 0
		for _, n := range nodes {
			if n.Running {
				running++
			}
		}
		if len(nodes) != len(c.Brokers) || running != len(c.Brokers) {
			t.Errorf("%s sees %d nodes, %d running; want %d running: %+v", b.MgmtURL, len(nodes), running, len(c.Brokers), nodes)
		}
	}
}

// queueInfo is the part of GET /api/queues/{vhost}/{name} about replicas.
type queueInfo struct {
	Name      string         `json:"name"`
	Type      string         `json:"type"`
	Node      string         `json:"node"`
	Leader    string         `json:"leader"`
	Members   []string       `json:"members"`
	Online    []string       `json:"online"`
	Arguments map[string]any `json:"arguments"`
}

func queue(t testing.TB, b *brokertest.Broker, vhost, name string) queueInfo {
	t.Helper()
	var q queueInfo
	getJSON(t, b, "/api/queues/"+url.PathEscape(vhost)+"/"+url.PathEscape(name), &q)
	return q
}

// waitOnline waits until every member of the quorum queue is online, as
// seen through b, after a node came back. A restart has waited until the
// node declares a quorum queue with a member on every node, so this takes
// milliseconds (at load 28 too); the guard is 2 minutes, as before.
func waitOnline(t testing.TB, b *brokertest.Broker, vhost, name string) queueInfo {
	t.Helper()
	timeout := waitguard.AtLeast(time.Second, 2*time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		q := queue(t, b, vhost, name)
		if len(q.Online) == len(q.Members) {
			return q
		}
		select {
		case <-ctx.Done():
			t.Fatalf("quorum queue %q: members %v, online %v after %v", name, q.Members, q.Online, timeout)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
