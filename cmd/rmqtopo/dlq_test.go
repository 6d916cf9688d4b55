package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
)

// TestDLQSweepTargets: a sweep target must be a queue of a --spec (and
// exist), or be allowed with --unmanaged-target; --dry-run moves and
// declares nothing; dlq show on a quorum queue says reading is a delivery.
func TestDLQSweepTargets(t *testing.T) {
	b := brokertest.Get(t)
	vhost := b.NewVhost(t)
	conn := b.Dial(t, vhost)
	declareQueue(t, conn, "orders.dlq", "quorum")
	// Dead letters of the retry helper: a reason, no x-death.
	publishN(t, conn, "orders.dlq", "m", 4, func(int) amqp.Table {
		return amqp.Table{contract.HeaderDeadLetterReason: contract.ReasonRejected, "tenant": "acme"}
	})
	specPath := filepath.Join(t.TempDir(), "orders.yaml")
	spec := "version: 1\nvhost: " + vhost + "\nqueues:\n  - name: orders\n    parking_lot: true\n    retry:\n      delays: [1s]\n"
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	sweep := func(extra ...string) (string, string, int) {
		return runCLI(t, args(b, append([]string{"dlq", "sweep", "--pattern", "*.dlq", "--max-deaths", "0", "--vhost", vhost}, extra...)...)...)
	}

	_, errs, code := sweep("--to", "{name}.dead")
	if want := `rmqtopo: dlq sweep: target "orders.dlq.dead" of queue "orders.dlq" is not a queue of any --spec; pass the spec that declares it, or --unmanaged-target to use a queue no spec manages`; code != 1 || strings.TrimSpace(errs) != want {
		t.Errorf("unmanaged target: exit %d, stderr %q\nwant %q", code, errs, want)
	}
	_, errs, code = sweep("--to", "orders.parking-lot", "--spec", specPath)
	if code != 1 || !strings.Contains(errs, `target "orders.parking-lot" is in the specs but not on the broker; run rmqtopo apply first`) {
		t.Errorf("declared target missing: exit %d, stderr %q", code, errs)
	}
	declareQueue(t, conn, "orders.parking-lot", "quorum")

	out, errs, code := sweep("--to", "orders.parking-lot", "--spec", specPath, "--dry-run")
	if code != 0 || !strings.Contains(out, "moved 0, left 4, failed 0 (4 would move (dry run))") {
		t.Errorf("dry run: exit %d\nstdout %q\nstderr %q", code, out, errs)
	}
	if n := b.QueueDepth(t, vhost, "orders.dlq"); n != 4 {
		t.Errorf("after a dry run orders.dlq has %d messages, want 4", n)
	}
	_, errs, _ = runCLI(t, args(b, "dlq", "show", "orders.dlq", "--vhost", vhost, "-n", "1")...)
	if !strings.Contains(errs, `note: "orders.dlq" is a quorum queue: reading it is a delivery, so each message read gets x-delivery-count one higher`) {
		t.Errorf("dlq show on a quorum queue does not say reading is a delivery: %q", errs)
	}
	out, errs, code = sweep("--to", "orders.parking-lot", "--spec", specPath)
	if code != 0 || !strings.Contains(out, "moved 4, left 0") || !strings.Contains(errs, "sweep keeps every header as it was") {
		t.Errorf("sweep: exit %d\nstdout %q\nstderr %q", code, out, errs)
	}
	if n := b.QueueDepth(t, vhost, "orders.parking-lot"); n != 4 {
		t.Errorf("orders.parking-lot has %d messages, want 4", n)
	}
}
