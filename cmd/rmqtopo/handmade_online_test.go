package main

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/brokertest"
)

// handMadeTTL is the hand-made retry queue's TTL: long enough that its
// messages are still there through import, plan and the apply that
// migrates the work queue (so the test sees them kept, not raced), short
// enough for a test.
const handMadeTTL = 25 * time.Second

// TestOnlineImportAdoptsHandMadeRetries (issue 43 point 1): the user's
// vhost, made by hand through the management API as the user made it: a
// topic exchange, a quorum work queue invoice.create bound to it and
// dead-lettering into invoice.create.failed, a quorum TTL retry queue
// dead-lettering back into the work queue, the DLQ, and an unrelated
// hand-made queue. With messages in each (work backlog, retry queue,
// DLQ), import writes a spec that adopts the scheme; plan names the retry
// queue retired (RT014); apply --prune migrates the work queue and the DLQ
// and keeps the retry queue, which still holds its messages; the retries
// come back to the work queue at their time; every id is accounted for;
// then plan --prune deletes the retry queue, now empty, and the unrelated
// queue is never touched.
func TestOnlineImportAdoptsHandMadeRetries(t *testing.T) {
	t.Parallel()
	o := newOnline(t)
	o.handMade(t)
	conn := o.b.Dial(t, o.vhost)
	work := publishIDsVia(t, conn, "billing", "invoice.create", "w", 20)
	retried := publishIDsVia(t, conn, "", "invoice.create.retry", "r", 10)
	dead := publishIDsVia(t, conn, "", "invoice.create.failed", "d", 5)
	audit := publishIDsVia(t, conn, "", "audit.log", "a", 1)
	published := time.Now()

	spec := filepath.Join(o.dir, "billing.yaml")
	_, stderr, code := rmqtopo(t, "", append([]string{"import", "--vhost", o.vhost, "-o", spec}, o.conn()...)...)
	if code != 0 || !strings.Contains(stderr, "1 hand-made retry scheme adopted") {
		t.Fatalf("import: exit %d\n%s", code, stderr)
	}
	data, _ := os.ReadFile(spec)
	for _, want := range []string{"dlq_name: invoice.create.failed", "retire:\n      - invoice.create.retry", "migrate: true", "retry: {delays: [25s]}"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the imported spec has no %q:\n%s", want, data)
		}
	}
	out := o.must(t, 0, "plan", spec)
	if !strings.Contains(out, `info[RT014]: retired: queue "invoice.create.retry"`) || !strings.Contains(out, "it holds 10 messages") ||
		!strings.Contains(out, "delete with --prune once empty") {
		t.Errorf("plan does not name the retired queue with its 10 messages:\n%s", out)
	}
	out, stderr, code = rmqtopo(t, "", append([]string{"apply", "--auto-approve", "--prune", spec}, o.conn()...)...)
	if code != 0 || !strings.Contains(out, "kept until it is empty") {
		t.Fatalf("apply --prune: exit %d, or it does not say the retired queue is kept:\n%s\n%s", code, out, stderr)
	}
	// The migration of the work queue waited for the retries to come back
	// into it at their time, then moved them with the backlog.
	if !strings.Contains(stderr, `waiting for 10 messages in retired queue "invoice.create.retry" to dead-letter back into it`) {
		t.Errorf("apply did not say it waited for the retired queue:\n%s", stderr)
	}
	if time.Since(published) < handMadeTTL {
		t.Errorf("apply ended %s after the retries were published, before their TTL (%s)", time.Since(published), handMadeTTL)
	}
	if !o.queueExists(t, "invoice.create.retry") {
		t.Errorf("apply --prune deleted the retired queue, which held 10 messages when planned")
	}
	o.retiredIsOwned(t, spec)

	// The backlog and the retries, which came back at their time; the DLQ
	// as it was.
	got := drainIDs(t, conn, "invoice.create", len(work)+len(retried), 0)
	if diff := cmp.Diff(sorted(work, retried), got); diff != "" {
		t.Errorf("the work queue gave back (-published +got):\n%s", diff)
	}
	if diff := cmp.Diff(sorted(dead), drainIDs(t, conn, "invoice.create.failed", len(dead), 0)); diff != "" {
		t.Errorf("the DLQ gave back (-published +got):\n%s", diff)
	}

	o.waitMessages(t, "invoice.create.retry", 0)
	out = o.must(t, 0, "apply", "--auto-approve", "--prune", spec)
	if o.queueExists(t, "invoice.create.retry") {
		t.Errorf("apply --prune kept the retired queue once empty:\n%s", out)
	}
	if diff := cmp.Diff(sorted(audit), drainIDs(t, conn, "audit.log", len(audit), 0)); diff != "" {
		t.Errorf("a hand-made queue the spec does not retire (-published +got):\n%s", diff)
	}
	if out := o.must(t, 0, "plan", "--prune", spec); !strings.Contains(out, "No changes.") {
		t.Errorf("plan after the adoption:\n%s", out)
	}
}

// handMade declares the user's vhost through the management API, as a
// person or another tool would: no ownership record names any of it.
func (o *online) handMade(t *testing.T) {
	t.Helper()
	v := url.PathEscape(o.vhost)
	o.api(t, http.MethodPut, "/api/exchanges/"+v+"/billing", `{"type":"topic","durable":true}`)
	for name, args := range map[string]string{
		"invoice.create":        `{"x-queue-type":"quorum","x-dead-letter-exchange":"","x-dead-letter-routing-key":"invoice.create.failed"}`,
		"invoice.create.retry":  fmt.Sprintf(`{"x-queue-type":"quorum","x-message-ttl":%d,"x-dead-letter-exchange":"","x-dead-letter-routing-key":"invoice.create"}`, handMadeTTL.Milliseconds()),
		"invoice.create.failed": `{"x-queue-type":"quorum"}`,
		"audit.log":             `{}`,
	} {
		o.api(t, http.MethodPut, "/api/queues/"+v+"/"+url.PathEscape(name), `{"durable":true,"arguments":`+args+`}`)
	}
	o.api(t, http.MethodPost, "/api/bindings/"+v+"/e/billing/q/invoice.create", `{"routing_key":"invoice.create"}`)
}

// retiredIsOwned checks that apply recorded the retired queue as the
// spec's: planned without its retire key, it is a queue the spec owned
// that left it (RT013), not a stranger's.
func (o *online) retiredIsOwned(t *testing.T, spec string) {
	t.Helper()
	data, _ := os.ReadFile(spec)
	without := strings.Replace(string(data), "    retire:\n      - invoice.create.retry\n", "", 1)
	path := filepath.Join(o.dir, "billing-without-retire.yaml")
	if err := os.WriteFile(path, []byte("name: billing\n"+without), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := o.must(t, 0, "plan", path); !strings.Contains(out, `warning[RT013]: queue "invoice.create.retry"`) {
		t.Errorf("without retire, the retired queue is not the spec's own (RT013):\n%s", out)
	}
}

// queueExists asks the management API whether queue exists.
func (o *online) queueExists(t *testing.T, queue string) bool {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, o.b.MgmtURL+"/api/queues/"+url.PathEscape(o.vhost)+"/"+url.PathEscape(queue), nil)
	req.SetBasicAuth(o.b.User, o.b.Password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// publishIDsVia publishes n persistent messages with ids prefix0.. through
// exchange with key, each confirmed, and returns the ids.
func publishIDsVia(t *testing.T, conn *amqp.Connection, exchange, key, prefix string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s%d", prefix, i)
		brokertest.PublishConfirmed(t, conn, exchange, key, amqp.Publishing{DeliveryMode: amqp.Persistent, MessageId: ids[i], Body: []byte(ids[i])})
	}
	return ids
}

// sorted is the ids of all lists, sorted.
func sorted(lists ...[]string) []string {
	out := slices.Concat(lists...)
	slices.Sort(out)
	return out
}
