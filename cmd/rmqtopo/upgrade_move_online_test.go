package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rmqtopo/rmqtopo/internal/brokertest"
)

// upgradeSpec is the blue-green test's spec: auto lays it out shared with
// a return queue on 3.10, shared with retries back by priority on 4.0, native (the AMQP 1.0 route: the delays
// are not linear) on 4.3.
const upgradeSpec = `version: 1
name: bg
vhost: /
queues:
  - name: bg.orders
    type: quorum
    retry: {delays: [1s, 3s, 6s]}
`

// bgDelays are upgradeSpec's delays: the delay before attempt n is
// bgDelays[n-2].
var bgDelays = []time.Duration{time.Second, 3 * time.Second, 6 * time.Second}

// TestOnlineUpgradeMove (issue 42 point 4) runs examples/blue-green/run.sh
// from a blue broker of an older release to a green one of the release
// under test while a publisher switches from blue to green and
// retry.Consume consumers fail messages once, twice or always on both; a
// first run of the script is killed (SIGKILL, its whole process group)
// mid-move and a second one finishes it. Every id must end acknowledged or
// in green's DLQ, no retry may come back before its delay, and no id's
// attempts may start over; blue must be empty.
func TestOnlineUpgradeMove(t *testing.T) {
	green, err := brokertest.ReleaseFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	var blues []string
	switch green.Series {
	case "4.3":
		blues = []string{"3.10", "4.0"}
	case "4.0":
		blues = []string{"3.10"}
	default:
		t.Skipf("green runs %s: the move's shovels need 4.0 or later on green", green.Series)
	}
	bin := filepath.Join(t.TempDir(), "rmqtopo")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, blue := range blues {
		t.Run(blue+"-to-"+green.Series, func(t *testing.T) { upgradePair(t, bin, blue, green.Series) })
	}
}

// bgNode starts a node of series with the shovel plugin, killed when the
// test ends.
func bgNode(t testing.TB, series, role string) *brokertest.Broker {
	t.Helper()
	n, err := brokertest.StartNode(context.Background(), brokertest.NodeConfig{
		Name:    fmt.Sprintf("bg%s%s-%d@localhost", role, strings.ReplaceAll(series, ".", ""), os.Getpid()),
		BaseDir: t.TempDir(), Series: series, StatsInterval: brokertest.TestStatsInterval,
		Plugins: []string{"rabbitmq_shovel"}})
	if err != nil {
		t.Fatalf("start %s node %s: %v", role, series, err)
	}
	t.Cleanup(n.Kill)
	return &brokertest.Broker{MgmtURL: n.MgmtURL(), AMQPURL: n.AMQPURL(), User: "guest", Password: "guest", Node: n}
}

func upgradePair(t *testing.T, bin, blueSeries, greenSeries string) {
	blue, green := bgNode(t, blueSeries, "blue"), bgNode(t, greenSeries, "green")
	dir := t.TempDir()
	specPath := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(specPath, []byte(upgradeSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "SPEC="+specPath, "RMQTOPO="+bin, "QUIET=6s",
		"BLUE_URL="+blue.MgmtURL, "BLUE_AMQP_URL="+blue.AMQPURL, "GREEN_URL="+green.MgmtURL,
		"GREEN_AMQP_URL="+green.AMQPURL, "RMQTOPO_USER=guest", "RMQTOPO_PASSWORD=guest")
	if out, err := exec.Command(bin, "apply", "--auto-approve", "--url", blue.MgmtURL, specPath).CombinedOutput(); err != nil {
		t.Fatalf("apply on blue: %v\n%s", err, out)
	}
	log := &bgLog{at: map[string][]bgEvent{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bconn := blue.Dial(t, "/")
	ids := deadLetterByBroker(t, bconn, 5) // DLQ messages with x-death
	stopBlue := bgConsume(ctx, blue.AMQPURL, "blue", log)
	ids = append(ids, bgPublish(t, bconn, "a", 150)...)
	time.Sleep(1500 * time.Millisecond) // retries now wait on blue
	stopBlue()
	ids = append(ids, requeuedOnce(t, bconn, 8)...)
	ids = append(ids, bgPublish(t, bconn, "b", 150)...) // a backlog no one consumes on blue

	first := exec.Command("bash", "../../examples/blue-green/run.sh")
	first.Env = env
	first.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, _ := first.StderrPipe()
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	waitLine(t, out, "upgrade move: on blue") // applied on green, shovels declared
	// retry.Consume refuses a queue that is not there: green's consumers
	// start once the spec is applied on green.
	stopGreen := bgConsume(ctx, green.AMQPURL, "green", log)
	defer stopGreen()
	time.Sleep(time.Second)
	_ = syscall.Kill(-first.Process.Pid, syscall.SIGKILL) // the script and rmqtopo, mid-move
	_ = first.Wait()
	t.Logf("killed the first run mid-move")

	// The publisher switches to green.
	gconn := green.Dial(t, "/")
	ids = append(ids, bgPublish(t, gconn, "c", 50)...)
	second := exec.Command("bash", "../../examples/blue-green/run.sh")
	second.Env = env
	if o, err := second.CombinedOutput(); err != nil {
		t.Fatalf("second run: %v\n%s", err, o)
	} else if !strings.Contains(string(o), "Upgrade preview of vhost /") || !strings.Contains(string(o), "Route: ") {
		t.Errorf("the second run printed no preview of blue against green:\n%s", o)
	} else {
		t.Logf("second run:\n%s", lastLines(string(o), 6))
	}
	checkUpgrade(t, blue, green, gconn, log, ids)
	pruneBlue(t, bin, blue, dir)
}

// pruneBlue is the route's clean-up (docs/upgrades.md): an empty spec of
// the same name applied with --prune deletes the spec's objects on blue.
func pruneBlue(t *testing.T, bin string, blue *brokertest.Broker, dir string) {
	t.Helper()
	empty := filepath.Join(dir, "empty.yaml")
	if err := os.WriteFile(empty, []byte("version: 1\nname: bg\nvhost: /\nqueues: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "apply", "--auto-approve", "--prune", "--url", blue.MgmtURL, empty).CombinedOutput(); err != nil {
		t.Fatalf("apply --prune of an empty spec on blue: %v\n%s", err, out)
	}
	qs, err := blue.Mgmt(t).ListQueuesIn("/")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		t.Errorf("blue still has queue %s after the clean-up", q.Name)
	}
}
