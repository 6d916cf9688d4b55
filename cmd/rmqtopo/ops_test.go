package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rabbithole "github.com/michaelklishin/rabbit-hole/v2"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/exitcode"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/ops"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/status"
	"github.com/rmqtopo/rmqtopo/topology"
)

// runCLI runs the CLI in-process the way main does.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = exitCode(run(context.Background(), args, strings.NewReader(""), &out, &errb), &errb)
	return out.String(), errb.String(), code
}

func connArgs(b *brokertest.Broker) []string {
	return []string{"--url", b.MgmtURL, "--amqp-url", b.AMQPURL, "--user", b.User, "--password", b.Password}
}

func args(b *brokertest.Broker, a ...string) []string { return append(a, connArgs(b)...) }

func declareQueue(t *testing.T, conn *amqp.Connection, name, typ string) {
	t.Helper()
	declareArgs(t, conn, name, amqp.Table{"x-queue-type": typ})
}

// declareDLQ declares a DLQ as rmqtopo's specs declare theirs, on every
// RabbitMQ version: a quorum one with the delivery limit
// spec.DeadEndDeliveryLimit, which the dlq commands need (see
// ops.CheckLeaveSafe; TestDLQCommandsRefuseLowDeliveryLimit shows why).
func declareDLQ(t *testing.T, conn *amqp.Connection, name, typ string) {
	t.Helper()
	declareArgs(t, conn, name, dlqArgs(typ))
}

// dlqArgs are the arguments of a DLQ of type typ, as rmqtopo's specs
// declare it.
func dlqArgs(typ string) amqp.Table {
	args := amqp.Table{"x-queue-type": typ}
	if typ == "quorum" {
		args["x-delivery-limit"] = int64(spec.DeadEndDeliveryLimit)
	}
	return args
}

func declareArgs(t *testing.T, conn *amqp.Connection, name string, args amqp.Table) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		t.Fatalf("declaring %q: %v", name, err)
	}
}

// publishN publishes n persistent messages with ids prefix000... to queue.
func publishN(t *testing.T, conn *amqp.Connection, queue, prefix string, n int, headers func(i int) amqp.Table) []string {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	var ids []string
	var dcs []*amqp.DeferredConfirmation
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%s%04d", prefix, i)
		ids = append(ids, id)
		var h amqp.Table
		if headers != nil {
			h = headers(i)
		}
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", queue, true, false,
			amqp.Publishing{MessageId: id, DeliveryMode: amqp.Persistent, Headers: h, Body: []byte("payload " + id)})
		if err != nil {
			t.Fatal(err)
		}
		dcs = append(dcs, dc)
	}
	for _, dc := range dcs {
		if !dc.Wait() {
			t.Fatal("publish nacked")
		}
	}
	return ids
}

func drain(t *testing.T, b *brokertest.Broker, conn *amqp.Connection, vhost, queue string) ([]string, []amqp.Delivery) {
	t.Helper()
	// A guard: draining the ~4,000 messages of the largest queue here takes
	// under a second (0.6 s seen on a loaded machine); 6 s keeps the
	// minute it had.
	ds := brokertest.Drain(t, conn, queue, b.QueueDepth(t, vhost, queue), waitguard.For(6*time.Second))
	var ids []string
	for _, d := range ds {
		ids = append(ids, d.MessageId)
	}
	return ids, ds
}

func pick(ids []string, keep func(i int) bool) []string {
	var out []string
	for i, id := range ids {
		if keep(i) {
			out = append(out, id)
		}
	}
	return out
}

func deaths(n int64) amqp.Table {
	return amqp.Table{"x-death": []any{amqp.Table{"queue": "work", "reason": "rejected", "count": n}}}
}

const opsSpec = `version: 1
vhost: %s
exchanges:
  - name: shop
    type: topic
queues:
  - name: orders
    bindings: [{exchange: shop, routing_key: order.created}]
    retry: {delays: [1s, 1m]}
    parking_lot: true
`

func TestStatusCommand(t *testing.T) {
	b := brokertest.Get(t)
	vhost := b.NewVhost(t)
	file := filepath.Join(t.TempDir(), "shop.yaml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(opsSpec, vhost)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := runCLI(t, args(b, "apply", file, "--auto-approve")...); code != 0 {
		t.Fatalf("apply exited %d:\n%s%s", code, out, errs)
	}
	out, errs, code := runCLI(t, args(b, "status", file, "--exit-code")...)
	if code != 0 {
		t.Fatalf("status of an empty topology exited %d:\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "1 work queue, DLQs empty, 1 without consumers, no drift") {
		t.Errorf("status of an empty topology:\n%s", out)
	}

	conn := b.Dial(t, vhost)
	publishN(t, conn, "orders.dlq", "m", 3, nil)
	// The management API refreshes its counts every second on the test
	// node (brokertest.TestStatsInterval). A guard: 2 s of need (1.9 s
	// seen on a loaded machine).
	var st status.Report
	deadline := waitguard.Deadline(2 * time.Second)
	for {
		out, errs, code = runCLI(t, args(b, "status", file, "--exit-code", "-f", "json")...)
		if code == exitcode.DLQNotEmpty || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if code != exitcode.DLQNotEmpty || errs != "" {
		t.Fatalf("status --exit-code with 3 dead letters exited %d, want %d; stderr %q", code, exitcode.DLQNotEmpty, errs)
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status JSON: %v\n%s", err, out)
	}
	type row struct {
		Name     string
		Role     string
		Messages int64
		Flags    []string
	}
	var got []row
	for _, q := range st.Queues[0].Queues {
		got = append(got, row{q.Name, q.Role, q.Messages, q.Flags})
	}
	want := []row{
		{"orders", status.RoleWork, 0, []string{status.FlagNoConsumers}},
		{"rmqtopo.wait.1s", status.RoleWait, 0, nil},
		{"rmqtopo.wait.1m", status.RoleWait, 0, nil},
		// A new queue gets a return queue (layout auto), as its plan says.
		{"orders.return", status.RoleReturn, 0, nil},
		{"orders.dlq", status.RoleDLQ, 3, []string{status.FlagDLQNotEmpty}},
		{"orders.parking-lot", status.RoleParkingLot, 0, nil},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status rows (-want +got):\n%s", diff)
	}

	// A queue deleted behind rmqtopo's back is missing and drifted; without
	// --exit-code a full DLQ is not an error.
	ch, _ := conn.Channel()
	if _, err := ch.QueueDelete("orders.parking-lot", false, false, false); err != nil {
		t.Fatal(err)
	}
	ch.Close()
	out, errs, code = runCLI(t, args(b, "status", file)...)
	if code != 0 {
		t.Fatalf("status exited %d: %s", code, errs)
	}
	for _, want := range []string{"dlq-not-empty", "missing drift", "drift: queue orders.parking-lot: create", "1 DLQ holding 3 messages", "1 queue missing, 1 drifted object"} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}
}

func TestDLQShowCommand(t *testing.T) {
	b := brokertest.Get(t)
	for _, typ := range []string{"classic", "quorum"} {
		t.Run(typ, func(t *testing.T) {
			vhost := b.NewVhost(t)
			conn := b.Dial(t, vhost)
			declareDLQ(t, conn, "orders.dlq", typ)
			ids := publishN(t, conn, "orders.dlq", "m", 8, func(i int) amqp.Table {
				return amqp.Table{contract.HeaderAttempt: "4", contract.HeaderLastError: fmt.Sprintf("timeout %d", i),
					contract.HeaderOriginalRoutingKey: "order.created", contract.HeaderFirstFailure: "2024-05-01T10:00:00Z"}
			})
			out, errs, code := runCLI(t, args(b, "dlq", "show", "orders.dlq", "--vhost", vhost, "-n", "3")...)
			if code != 0 {
				t.Fatalf("dlq show exited %d: %s", code, errs)
			}
			for _, want := range []string{
				"queue orders.dlq (vhost " + vhost + "): 8 messages, showing 3",
				"#1 id m0000", "#3 id m0002",
				"reason:         retries exhausted (from attempt)",
				"last error:     timeout 2",
				`original route: exchange "", routing key "order.created"`,
			} {
				if !strings.Contains(out, want) {
					t.Errorf("dlq show output lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "#4") {
				t.Errorf("dlq show -n 3 shows a fourth message:\n%s", out)
			}
			out, _, code = runCLI(t, args(b, "dlq", "show", "orders.dlq", "--vhost", vhost, "-n", "2", "-f", "json")...)
			var doc struct {
				Depth          int
				ReadIsDelivery bool `json:"read_is_delivery"`
				Messages       []ops.Message
			}
			if code != 0 || json.Unmarshal([]byte(out), &doc) != nil {
				t.Fatalf("dlq show -f json exited %d:\n%s", code, out)
			}
			if doc.ReadIsDelivery != (typ == "quorum") {
				t.Errorf("dlq show -f json on a %s queue: read_is_delivery %v", typ, doc.ReadIsDelivery)
			}
			if doc.Depth != 8 || len(doc.Messages) != 2 || doc.Messages[1].MessageID != "m0001" || doc.Messages[1].LastError != "timeout 1" ||
				doc.Messages[1].Attempt == nil || *doc.Messages[1].Attempt != 4 {
				t.Errorf("dlq show JSON: %+v", doc)
			}
			// Neither peek consumed nor reordered anything.
			got, _ := drain(t, b, conn, vhost, "orders.dlq")
			if diff := cmp.Diff(ids, got); diff != "" {
				t.Errorf("queue after dlq show (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDLQReplayCommand(t *testing.T) {
	b := brokertest.Get(t)
	vhost := b.NewVhost(t)
	conn := b.Dial(t, vhost)
	declareQueue(t, conn, "orders", "classic")
	declareDLQ(t, conn, "orders.dlq", "quorum")
	ids := publishN(t, conn, "orders.dlq", "m", 10, func(i int) amqp.Table {
		h := deaths(1)
		h[contract.HeaderAttempt] = "3"
		h["tenant"] = []string{"acme", "other"}[i%2]
		return h
	})
	out, errs, code := runCLI(t, args(b, "dlq", "replay", "orders.dlq", "--vhost", vhost, "--header", "tenant=acme", "-n", "3")...)
	if code != 0 {
		t.Fatalf("dlq replay exited %d: %s", code, errs)
	}
	if !strings.Contains(out, "orders.dlq -> orders: moved 3, left 2, failed 0 (2 header does not match); stopped: moved the limit of 3 messages") {
		t.Errorf("dlq replay output:\n%s", out)
	}
	if want := "replay dropped rmqtopo-attempt, x-death from the messages it moved (it resets rmqtopo-attempt, rmqtopo-dead-letter-reason and the broker's dead-lettering headers) and kept every other header\n"; !strings.Contains(errs, want) {
		t.Errorf("dlq replay stderr %q lacks %q", errs, want)
	}
	got, ds := drain(t, b, conn, vhost, "orders")
	if diff := cmp.Diff([]string{ids[0], ids[2], ids[4]}, got); diff != "" {
		t.Errorf("replayed (-want +got):\n%s", diff)
	}
	for _, d := range ds {
		if d.Headers[contract.HeaderReplayCount] != "1" || d.Headers[contract.HeaderAttempt] != nil || d.Headers["x-death"] != nil {
			t.Errorf("replayed %s has headers %v", d.MessageId, d.Headers)
		}
	}
	got, _ = drain(t, b, conn, vhost, "orders.dlq")
	if diff := cmp.Diff(pick(ids, func(i int) bool { return i%2 == 1 || i > 4 }), got); diff != "" {
		t.Errorf("left in the DLQ (-want +got):\n%s", diff)
	}
}

func TestDLQSweepCommand(t *testing.T) {
	b := brokertest.Get(t)
	vhost := b.NewVhost(t)
	conn := b.Dial(t, vhost)
	declareQueue(t, conn, "dlq.a", "classic")
	declareDLQ(t, conn, "dlq.b", "quorum")
	declareQueue(t, conn, "keep", "classic")
	counts := func(i int) amqp.Table {
		switch i % 4 {
		case 0:
			return deaths(1)
		case 1:
			return deaths(5)
		case 2:
			return amqp.Table{"x-death": "unreadable"}
		}
		return nil
	}
	idsA := publishN(t, conn, "dlq.a", "a", 8, counts)
	idsB := publishN(t, conn, "dlq.b", "b", 8, counts)
	publishN(t, conn, "keep", "k", 8, counts)

	// The pattern and the target come from the file, the threshold from the
	// environment, which beats the file's.
	config := filepath.Join(t.TempDir(), "sweep.yaml")
	if err := os.WriteFile(config, []byte("pattern: dlq.*\nto: dead.{name}\nmax_deaths: 100\nunmanaged_target: true\nvhost: "+vhost+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RMQTOPO_SWEEP_MAX_DEATHS", "2")
	out, errs, code := runCLI(t, args(b, "dlq", "sweep", "--config", config)...)
	if code != 0 {
		t.Fatalf("dlq sweep exited %d: %s", code, errs)
	}
	want := "dlq.a -> dead.dlq.a: moved 2, left 6, failed 0 (4 at or below the threshold; 2 unreadable x-death, left in place)\n" +
		"dlq.b -> dead.dlq.b: moved 2, left 6, failed 0 (4 at or below the threshold; 2 unreadable x-death, left in place)\n" +
		"total: moved 4, left 12, failed 0 (8 at or below the threshold; 4 unreadable x-death, left in place)\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("dlq sweep output (-want +got):\n%s", diff)
	}
	moved := func(i int) bool { return i%4 == 1 }
	for q, ids := range map[string][]string{"a": idsA, "b": idsB} {
		got, _ := drain(t, b, conn, vhost, "dead.dlq."+q)
		if diff := cmp.Diff(pick(ids, moved), got); diff != "" {
			t.Errorf("dead.dlq.%s (-want +got):\n%s", q, diff)
		}
		got, _ = drain(t, b, conn, vhost, "dlq."+q)
		if diff := cmp.Diff(pick(ids, func(i int) bool { return !moved(i) }), got); diff != "" {
			t.Errorf("left in dlq.%s (-want +got):\n%s", q, diff)
		}
	}
	if n := b.QueueDepth(t, vhost, "keep"); n != 8 {
		t.Errorf("queue keep has %d messages, want its 8", n)
	}
	info, err := b.Mgmt(t).GetQueue(vhost, "dead.dlq.b")
	if err != nil || !info.Durable || info.Type != "classic" {
		t.Errorf("target dead.dlq.b: %+v, %v; want a durable classic queue", info, err)
	}
}

// TestOpsErrors checks that bad input gives one clear line and exit 1.
func TestOpsErrors(t *testing.T) {
	b := brokertest.Get(t)
	vhost := b.NewVhost(t)
	conn := b.Dial(t, vhost)
	declareQueue(t, conn, "orders.dlq", "classic")
	user := "nobody-" + strings.TrimPrefix(vhost, "t-")
	mgmt := b.Mgmt(t)
	res, err := mgmt.PutUser(user, rabbithole.UserSettings{Password: "s3cret-pw", Tags: rabbithole.UserTags{"management"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	t.Cleanup(func() {
		if res, err := mgmt.DeleteUser(user); err == nil {
			res.Body.Close()
		}
	})
	noPerm := []string{"--url", b.MgmtURL, "--amqp-url", b.AMQPURL, "--user", user, "--password", "s3cret-pw"}
	// How the management API refuses a vhost the user has no permissions
	// on: 401 up to 4.2, 404 "Not Found" from 4.3 (see broker.httpError).
	denied := fmt.Sprintf(`permission denied for user %q: User not authorised to access virtual host (HTTP 401)`, user)
	if version, err := topology.ParseVersion(b.Version(t)); err != nil {
		t.Fatal(err)
	} else if version.AtLeast(4, 3) {
		denied = fmt.Sprintf(`permission denied for user %q: User not authorised to access virtual host (HTTP 404: the broker hides a vhost from a user without permission on it)`, user)
	}
	badConfig := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(badConfig, []byte(`{"pattern": "x", "max_death": 3}`), 0o644)

	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"show an unknown queue", args(b, "dlq", "show", "nope", "--vhost", vhost),
			fmt.Sprintf(`rmqtopo: dlq show: queue "nope" not found in vhost %q`, vhost)},
		{"show an unknown queue of the default vhost", args(b, "dlq", "show", "nope-"+vhost),
			fmt.Sprintf(`rmqtopo: dlq show: queue %q not found in vhost "/"; give the queue's vhost with --vhost, or its spec file`, "nope-"+vhost)},
		{"replay an unknown queue", args(b, "dlq", "replay", "nope.dlq", "--vhost", vhost),
			fmt.Sprintf(`rmqtopo: dlq replay: queue "nope.dlq" not found in vhost %q`, vhost)},
		{"replay to a missing work queue", args(b, "dlq", "replay", "orders.dlq", "--vhost", vhost),
			fmt.Sprintf(`rmqtopo: dlq replay: work queue "orders" not found in vhost %q; give the queue to replay to with --to`, vhost)},
		{"replay from a queue not named like a DLQ", args(b, "dlq", "replay", "orders", "--vhost", vhost),
			`rmqtopo: dlq replay: queue "orders" is not named like a DLQ ("QUEUE.dlq"); give the work queue with --to`},
		{"sweep a pattern that matches nothing", args(b, "dlq", "sweep", "--pattern", "zzz.*", "--max-deaths", "1", "--to", "dead.{name}", "--vhost", vhost),
			fmt.Sprintf(`rmqtopo: dlq sweep: vhost %q: no queue matches the pattern "zzz.*"`, vhost)},
		{"sweep without a threshold", args(b, "dlq", "sweep", "--pattern", "*.dlq", "--to", "dead.{name}", "--vhost", vhost),
			`rmqtopo: dlq sweep: a death threshold is required: --max-deaths, RMQTOPO_SWEEP_MAX_DEATHS or "max_deaths" in --config`},
		{"sweep with a bad config key", args(b, "dlq", "sweep", "--config", badConfig),
			fmt.Sprintf(`rmqtopo: dlq sweep: --config %s: unknown key "max_death" (known: pattern, max-deaths, to, vhost, window, unmanaged-target)`, badConfig)},
		{"show without permission", append([]string{"dlq", "show", "orders.dlq", "--vhost", vhost}, noPerm...),
			fmt.Sprintf(`rmqtopo: dlq show: reading queue "orders.dlq" in vhost %q: %s`, vhost, denied)},
		{"sweep without permission", append([]string{"dlq", "sweep", "--pattern", "*", "--max-deaths", "1", "--to", "x", "--vhost", vhost}, noPerm...),
			fmt.Sprintf(`rmqtopo: dlq sweep: listing the queues of vhost %q: %s`, vhost, denied)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, errs, code := runCLI(t, tt.args...)
			if code != 1 || out != "" || errs != tt.want+"\n" {
				t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant exit 1, no stdout, stderr:\n%s", code, out, errs, tt.want)
			}
		})
	}

	file := filepath.Join(t.TempDir(), "shop.yaml")
	os.WriteFile(file, []byte(fmt.Sprintf(opsSpec, vhost)), 0o644)
	_, errs, code := runCLI(t, append([]string{"status", file}, noPerm...)...)
	want := fmt.Sprintf(`rmqtopo: status: listing the queues of vhost %q: %s`+"\n", vhost, denied)
	if code != 1 || errs != want {
		t.Errorf("status without permission: exit %d, stderr:\n%s\nwant exit 1 and:\n%s", code, errs, want)
	}
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// buildCLI builds the rmqtopo binary once per test run; brokerM.Run
// removes it when the run ends.
func buildCLI(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "rmqtopo-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "rmqtopo")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// TestSIGKILLLosesNothing kills the real binary in the middle of a sweep
// and of a replay, then counts: every message is still somewhere, at most
// twice.
func TestSIGKILLLosesNothing(t *testing.T) {
	b := brokertest.Get(t)
	bin := buildCLI(t)
	const n = 4000
	for _, tt := range []struct {
		name, typ, source, target string
		cmd                       func(vhost string) []string
	}{
		{"sweep", "classic", "dlq.orders", "dead.dlq.orders", func(vhost string) []string {
			return args(b, "dlq", "sweep", "--pattern", "dlq.*", "--max-deaths", "1", "--to", "dead.{name}", "--vhost", vhost, "--window", "50", "--unmanaged-target")
		}},
		{"replay", "quorum", "orders.dlq", "orders", func(vhost string) []string {
			return args(b, "dlq", "replay", "orders.dlq", "--vhost", vhost, "--window", "50")
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			vhost := b.NewVhost(t)
			conn := b.Dial(t, vhost)
			declareDLQ(t, conn, tt.source, tt.typ)
			declareQueue(t, conn, tt.target, "classic")
			// Every tenth message stays: it is not dead enough for the sweep.
			ids := publishN(t, conn, tt.source, "m", n, func(i int) amqp.Table {
				if i%10 == 0 {
					return deaths(1)
				}
				return deaths(3)
			})
			cmd := exec.Command(bin, tt.cmd(vhost)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			// Kill it once moves are under way. A guard: the process starts
			// and moves 200 messages in about a second (0.7-1.5 s seen on a
			// loaded machine).
			guard := waitguard.For(2 * time.Second)
			deadline := time.Now().Add(guard)
			for b.QueueDepth(t, vhost, tt.target) < 200 {
				select {
				case err := <-exited:
					t.Fatalf("the %s finished before the kill (%v); stderr:\n%s", tt.name, err, stderr.String())
				default:
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatalf("no move within %s; stderr:\n%s", guard, stderr.String())
				}
				time.Sleep(5 * time.Millisecond)
			}
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-exited
			// The broker requeues the killed connection's messages as soon
			// as it notices; wait for all of them to be ready again. A
			// guard (0.5-1.1 s seen on a loaded machine); should it run
			// out, the drains below tell which messages are lost.
			var src, dst int
			for deadline := waitguard.Deadline(2 * time.Second); ; {
				src, dst = b.QueueDepth(t, vhost, tt.source), b.QueueDepth(t, vhost, tt.target)
				if src+dst >= n || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			time.Sleep(300 * time.Millisecond)
			seen := map[string]int{}
			for _, q := range []string{tt.source, tt.target} {
				got, _ := drain(t, b, conn, vhost, q)
				for _, id := range got {
					seen[id]++
				}
			}
			dups := 0
			for _, id := range ids {
				switch c := seen[id]; {
				case c == 0:
					t.Errorf("message %s was lost", id)
				case c > 2:
					t.Errorf("message %s exists %d times", id, c)
				case c == 2:
					dups++
				}
			}
			t.Logf("killed with %d of %d in the target; %d duplicates", dst, n, dups)
		})
	}
}
