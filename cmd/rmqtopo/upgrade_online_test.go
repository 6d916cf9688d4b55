package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rabbithole "github.com/michaelklishin/rabbit-hole/v2"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/exitcode"
	"github.com/rmqtopo/rmqtopo/internal/upgrade"
)

// previewSources are the source releases whose preview each target
// release checks: make test RABBITMQ=4.3 runs 3.10→4.3 and 4.0→4.3,
// RABBITMQ=4.0 runs 3.10→4.0.
var previewSources = map[string][]string{"4.0": {"3.10"}, "4.3": {"3.10", "4.0"}}

// previewQueue is one queue the test declares on the source, and the
// target, with the verdict code it must get ("" for a clean one).
type previewQueue struct {
	name string
	body map[string]any
	code string
}

func previewQueues() []previewQueue {
	q := func(name, typ string, durable bool, args map[string]any, code string) previewQueue {
		a := map[string]any{"x-queue-type": typ}
		for k, v := range args {
			a[k] = v
		}
		return previewQueue{name, map[string]any{"durable": durable, "arguments": a}, code}
	}
	return []previewQueue{
		q("clean.classic", "classic", true, nil, ""),
		q("clean.quorum.dl", "quorum", true, map[string]any{"x-delivery-limit": 1, "x-dead-letter-exchange": "amq.fanout"}, upgrade.CodeNackNotCounted),
		q("transient", "classic", false, nil, upgrade.CodeTransientQueue),
		q("v1", "classic", true, map[string]any{"x-queue-version": 1}, upgrade.CodeArgumentRefused),
		q("locator", "classic", true, map[string]any{"x-queue-master-locator": "min-masters"}, upgrade.CodeArgumentRefused),
		q("lazy", "classic", true, map[string]any{"x-queue-mode": "lazy"}, upgrade.CodeArgumentIgnored),
		q("nolimit", "quorum", true, nil, upgrade.CodeDefaultLimit),
		q("timeout", "classic", true, nil, upgrade.CodeConsumerTimeout),
	}
}

// previewPolicies: name → definition; the ha- one only where the source
// takes it (before 4.0).
var previewPolicies = map[string]map[string]any{
	"ha":  {"ha-mode": "all"},
	"qml": {"queue-master-locator": "min-masters"},
}

// previewBindings: queue → the key of its binding to the topic exchange
// topic.x; three # are refused from 4.3.5 (UP114), two are not.
var previewBindings = map[string]string{"clean.classic": "a.#.#.#", "timeout": "#.b.#"}

// TestPreviewAgainstTarget runs the preview of a source broker's vhost
// against the target release and asks a live target broker about every
// object: each verdict must be the target's own answer, 0 disagreements.
// The target runs twice: as its release installs (no plugin enabled), and
// with the exchange-type plugins its packages ship enabled.
func TestPreviewAgainstTarget(t *testing.T) {
	target := os.Getenv(brokertest.EnvRabbitMQ)
	if target == "" {
		target = brokertest.DefaultRelease
	}
	sources := previewSources[target]
	if len(sources) == 0 {
		t.Skipf("RabbitMQ %s is the target of no release pair (3.10→4.0, 3.10→4.3, 4.0→4.3)", target)
	}
	ctx := context.Background()
	nodes := startPreviewNodes(t, ctx, append([]previewNode{{target, nil}, {target, exchangePlugins}}, sourceNodes(sources)...))
	for i, src := range sources {
		t.Run(src+"→"+target, func(t *testing.T) {
			checkPreviewPair(t, nodes[i+2], previewTarget{plain: nodes[0], plugins: nodes[1]}, target)
		})
	}
}

// previewNode is a node to start: its series and the plugins it enables
// besides management.
type previewNode struct {
	series  string
	plugins []string
}

// previewTarget is the target release's two nodes: as installed, and
// with the exchange-type plugins enabled.
type previewTarget struct{ plain, plugins *brokertest.Node }

// sourceNodes: each source enables two exchange-type plugins, one used
// by an exchange of the vhost (UP116) and one unused (UP119).
func sourceNodes(series []string) []previewNode {
	var out []previewNode
	for _, s := range series {
		out = append(out, previewNode{s, []string{"rabbitmq_consistent_hash_exchange", "rabbitmq_random_exchange"}})
	}
	return out
}

// startPreviewNodes starts the nodes side by side.
func startPreviewNodes(t *testing.T, ctx context.Context, want []previewNode) []*brokertest.Node {
	nodes := make([]*brokertest.Node, len(want))
	errs := make([]error, len(want))
	dir := t.TempDir()
	var wg sync.WaitGroup
	for i, w := range want {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodes[i], errs[i] = brokertest.StartNode(ctx, brokertest.NodeConfig{
				Name:    fmt.Sprintf("preview%d-%s-%d@localhost", i, strings.ReplaceAll(w.series, ".", ""), os.Getpid()),
				BaseDir: dir, Series: w.series, StatsInterval: brokertest.TestStatsInterval, Plugins: w.plugins})
		}()
	}
	wg.Wait()
	for i, n := range nodes {
		if n != nil {
			t.Cleanup(n.Kill)
		}
		if errs[i] != nil {
			t.Fatalf("starting RabbitMQ %s with %v: %v", want[i].series, want[i].plugins, errs[i])
		}
	}
	return nodes
}

// previewCheck gathers the disagreements between the preview's verdicts
// and a target broker's own answers.
type previewCheck struct {
	target   string
	vs       []upgrade.Verdict
	checks   int
	disagree []string
}

func (c *previewCheck) agree(what string, verdict, broker bool) {
	c.checks++
	if verdict != broker {
		c.disagree = append(c.disagree, fmt.Sprintf("%s: verdict %v, target %s says %v", what, verdict, c.target, broker))
	}
}

// checkPreviewPair declares the objects on src, previews them against
// target's release and compares each verdict with the target's own
// answer.
func checkPreviewPair(t *testing.T, src *brokertest.Node, tgt previewTarget, target string) {
	dst := tgt.plain
	srcRefused := declareAll(t, src)
	declareExchanges(t, src)
	conn, err := amqp.Dial(src.AMQPURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, _ := conn.Channel()
	if err := ch.Qos(10, 0, true); err != nil {
		t.Fatalf("source refused global QoS: %v", err)
	}
	if _, err := ch.Consume("timeout", "held", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	waitGlobalQoS(t, src, strings.HasPrefix(t.Name(), "TestPreviewAgainstTarget/3."))
	out, stderr, code := runCLI(t, "upgrade", "preview", "--to", target, "--url", src.MgmtURL(), "--format", "json")
	if code != exitcode.UpgradeRefused {
		t.Fatalf("exit %d, want %d (refusals); stderr: %s\n%s", code, exitcode.UpgradeRefused, stderr, out)
	}
	var rep struct {
		Verdicts []upgrade.Verdict `json:"verdicts"`
		Route    upgrade.Route     `json:"route"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	c := &previewCheck{target: target, vs: rep.Verdicts}
	c.declarations(t, srcRefused, declareAll(t, dst), src, dst)
	c.behaviours(t, src, dst)
	c.exchanges(t, src, tgt)
	if rep.Route.Kind != "blue-green" && strings.Contains(t.Name(), "/3.10") {
		c.disagree = append(c.disagree, "route from 3.10: "+rep.Route.Kind)
	}
	t.Logf("%d verdicts, %d answers of the target compared; disagreements: %d", len(c.vs), c.checks, len(c.disagree))
	for _, d := range c.disagree {
		t.Error(d)
	}
}

// declarations: what the target refuses, the verdicts of clean objects,
// and the default delivery limit.
func (c *previewCheck) declarations(t *testing.T, srcRefused, dstRefused map[string]bool, src, dst *brokertest.Node) {
	for _, q := range previewQueues() {
		obj := "queue " + q.name
		c.agree(obj+" refused", refusedCode(c.vs, obj), dstRefused[obj])
		if q.code == upgrade.CodeArgumentIgnored || q.code == upgrade.CodeTransientQueue {
			// Accepted by the target: what it does with them is the
			// version table's probes' (TestKeyTableAgainstBroker).
			c.agree(obj+" has "+q.code, hasCode(c.vs, obj, q.code), true)
		}
		if q.code == "" {
			c.agree(obj+" clean", len(codesFor(c.vs, obj)) == 0, true)
		}
		if !dstRefused[obj] && q.name == "nolimit" {
			c.agree(obj+" default delivery limit", hasCode(c.vs, obj, upgrade.CodeDefaultLimit),
				deliveryLimit(t, dst, q.name) == 20 && deliveryLimit(t, src, q.name) != 20)
		}
	}
	for queue := range previewBindings {
		obj := "binding topic.x -> queue " + queue
		c.agree(obj+" refused", refusedCode(c.vs, obj), dstRefused[obj])
	}
	for name := range previewPolicies {
		obj := "policy " + name
		if !srcRefused[obj] {
			c.agree(obj+" refused", refusedCode(c.vs, obj), dstRefused[obj])
		}
	}
}

// behaviours asks both brokers what they do: global QoS, nacks, client
// x-death, and (4.3) classic consumer timeouts.
func (c *previewCheck) behaviours(t *testing.T, src, dst *brokertest.Node) {
	sg, sp := qosShown(t, src)
	dg, dp := qosShown(t, dst)
	sq, dq := qosPerConsumer(t, src), qosPerConsumer(t, dst)
	sn, dn := nacksCounted(t, src, "clean.quorum.dl"), nacksCounted(t, dst, "clean.quorum.dl")
	sd, dd := clientDeathRead(t, src), clientDeathRead(t, dst)
	t.Logf("asked live: global QoS shown as global %d prefetch %d (source), %d %d (target), per consumer %v/%v; nacks counted %v/%v; client x-death read %v/%v",
		sg, sp, dg, dp, sq, dq, sn, dn, sd, dd)
	globalVerdict := slices.ContainsFunc(c.vs, func(v upgrade.Verdict) bool {
		return v.Code == upgrade.CodeGlobalQoS || v.Code == upgrade.CodeGlobalQoSUnseen
	})
	c.agree(fmt.Sprintf("global QoS different (per consumer: source %v, target %v)", sq, dq), globalVerdict, sq != dq)
	c.agree("global QoS unseen on the source", hasCode(c.vs, "vhost /", upgrade.CodeGlobalQoSUnseen), sg < 0 && sq != dq)
	c.agree("nack not counted (different)", hasCode(c.vs, "queue clean.quorum.dl", upgrade.CodeNackNotCounted), sn != dn)
	c.agree("client x-death ignored", hasCode(c.vs, "vhost /", upgrade.CodeClientDeath), sd && !dd)
	if c.target == "4.3" {
		// 4.0 checks consumer timeouts once a minute: only 4.3's answer
		// (none) is quick to ask.
		if !timeoutApplied(t, dst, "timeout.control", "quorum") {
			t.Fatal("the control failed: 4.3 did not time out a quorum queue's consumer, so the probe cannot tell")
		}
		applied := timeoutApplied(t, dst, "timeout", "classic")
		t.Logf("asked live: a 1 s consumer-timeout policy cancelled a quorum queue's consumer (the control), and a classic queue's: %v", applied)
		c.agree("classic consumer timeout ignored", hasCode(c.vs, "queue timeout", upgrade.CodeConsumerTimeout), !applied)
	}
}

// waitGlobalQoS waits until the source's management API shows the
// channel's global prefetch (statistics lag).
func waitGlobalQoS(t *testing.T, n *brokertest.Node, globalShown bool) {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var cs []struct {
			Global int `json:"global_prefetch_count"`
		}
		var consumers []any
		mgmt(t, n, http.MethodGet, "/api/vhosts/%2F/channels", nil, &cs)
		mgmt(t, n, http.MethodGet, "/api/consumers/%2F", nil, &consumers)
		if len(cs) > 0 && (cs[0].Global > 0 || !globalShown) && len(consumers) > 0 {
			return
		}
	}
	t.Fatal("the source's management API shows no channel with a global prefetch within 30 s")
}

// TestPreviewExitCodes: on the run's own broker, a vhost whose only
// finding is an argument the target ignores exits 0, and 9 with
// --detailed-exitcode; a policy the target refuses exits 8 either way.
// The text names the code, the value and the route.
func TestPreviewExitCodes(t *testing.T) {
	b := brokertest.Get(t)
	vhost := b.NewVhost(t)
	conn := b.Dial(t, vhost)
	declareArgs(t, conn, "lazy", amqp.Table{"x-queue-type": "classic", "x-queue-mode": "lazy"})
	base := args(b, "upgrade", "preview", "--to", "4.3", "--vhost", vhost)
	out, stderr, code := runCLI(t, base...)
	if code != 0 || !strings.Contains(out, "UP103") || !strings.Contains(out, "x-queue-mode=lazy") || !strings.Contains(out, "Route: ") {
		t.Fatalf("exit %d, want 0 and UP103 x-queue-mode=lazy and a route; stderr %s\n%s", code, stderr, out)
	}
	if _, stderr, code = runCLI(t, append(base, "--detailed-exitcode")...); code != exitcode.UpgradeWarnings {
		t.Fatalf("--detailed-exitcode: exit %d, want %d; stderr %s", code, exitcode.UpgradeWarnings, stderr)
	}
	// queue-master-locator: 3.10 and 4.0 take the key, 4.3 by default
	// refuses it (UP102), so a 4.3 broker cannot hold it: there the pair
	// test's refusals stand for exit 8.
	c := b.Mgmt(t)
	res, err := c.PutPolicy(vhost, "qml", rabbithole.Policy{Pattern: "^qml$", ApplyTo: "queues",
		Definition: rabbithole.PolicyDefinition{"queue-master-locator": "min-masters"}})
	if err != nil {
		if strings.HasPrefix(b.Version(t), "4.3") {
			t.Logf("4.3 refuses the queue-master-locator policy, as UP102 says: %v", err)
			return
		}
		t.Fatal(err)
	}
	res.Body.Close()
	out, stderr, code = runCLI(t, base...)
	if code != exitcode.UpgradeRefused || !strings.Contains(out, "UP102") {
		t.Fatalf("exit %d, want %d and UP102; stderr %s\n%s", code, exitcode.UpgradeRefused, stderr, out)
	}
}
