package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/rabbitmq"
	"github.com/rmqtopo/rmqtopo/topology"
)

// A plan shows only what the broker will do (issue 46, point 5): for each
// layout of a work queue and each spec key that sets an attribute of it,
// the test applies a value, raises it, lowers it and removes it, and
// after each apply reads back the value the broker uses and compares it
// with what the plan said it would set. A step the plan refuses (a
// validation error or an error diagnostic) must be refused by apply too
// and leave the broker's value as it was.
//
// The broker's value of a queue attribute is the lower of the queue's
// argument and its policy's key (RabbitMQ's args_policy_lookup), which
// the test reads from the queue's arguments and effective policy; for the
// delivery limit, 4.x also reports the value its state machine uses
// (delivery_limit, from the queue's tick, so polled), and 4.3 the delayed
// retry it applies. Where cheap the test also checks the behaviour: a
// length limit by publishing past it, a delivery limit (3.x, which does
// not report it) by rejecting a message until the broker dead-letters it.

// effKey is a spec key that sets an attribute of the work queue: attr is
// the policy key (and, with "x-", the argument) that carries it, steps
// the values it takes in turn ("" leaves the key out of the spec).
type effKey struct {
	name, attr string
	steps      []string
	// value is the attribute the spec's value v asks for; ok is false
	// when v does not say (the key left out).
	value func(v string) (n int64, ok bool)
	// check verifies the broker's behaviour for the effective value n.
	check func(t *testing.T, r *effRun, n int64)
	// nativeOnly: the key sets the attribute only on the native layout
	// (the retry schedule is the native queue's delivery limit).
	nativeOnly bool
}

var effKeys = []effKey{
	{name: "message_ttl", attr: "message-ttl", steps: []string{"2s", "5s", "1s", ""}, value: effDuration},
	{name: "max_length", attr: "max-length", steps: []string{"3", "5", "2", ""}, value: effInt, check: checkMaxLength},
	{name: "delivery_limit", attr: contract.KeyDeliveryLimit, steps: []string{"", "30", "4", "40"}, value: effInt, check: checkDeliveryLimit},
	{name: "retry", attr: contract.KeyDeliveryLimit, steps: []string{"[20s]", "[20s, 20s, 20s]", "[20s, 20s]"}, value: effDelays, nativeOnly: true},
}

func effDuration(v string) (int64, bool) {
	d, err := time.ParseDuration(v)
	return d.Milliseconds(), err == nil
}

func effInt(v string) (int64, bool) {
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

// effDelays is the delivery limit a native queue's schedule gives it:
// one delivery per retry.
func effDelays(v string) (int64, bool) {
	return int64(strings.Count(v, ",") + 1), v != ""
}

// effLayouts are the layouts of the work queue: custodyLayouts and auto,
// which on 4.3.1+ makes a new quorum queue native unless the spec asks
// what native cannot do (its own delivery_limit), and keeps a live
// queue's layout.
var effLayouts = append(append([]custodyLayout{}, custodyLayouts...), custodyLayout{name: "auto", yaml: "layout: auto"})

// TestEffectiveValues runs each layout × key (see above).
func TestEffectiveValues(t *testing.T) {
	t.Parallel()
	o := newOnline(t)
	native := nativeBroker(t, o)
	for _, l := range effLayouts {
		for _, k := range effKeys {
			if l.native && !native || k.nativeOnly && !l.native {
				continue
			}
			t.Run(l.name+"/"+k.name, func(t *testing.T) {
				t.Parallel()
				runEffective(t, l, k)
			})
		}
	}
}

// effRun is a layout × key being run, in a vhost of its own.
type effRun struct {
	o       *online
	conn    *amqp.Connection
	release topology.Version
	// planned is the work queue's arguments and policy as the plans so
	// far said they would be.
	args, policy map[string]any
}

const effQueue = "ew"

func runEffective(t *testing.T, l custodyLayout, k effKey) {
	o := newOnline(t)
	r := &effRun{o: o, conn: o.b.Dial(t, o.vhost), release: o.release(t)}
	applied := false
	for i, v := range k.steps {
		path := o.spec(t, "spec.yaml", effSpec(l, k, v))
		refusal, ok := r.plan(t, path)
		if !ok {
			if !applied {
				t.Fatalf("step %d (%s=%q): the first spec is refused: %s", i, k.name, v, refusal)
			}
			r.refused(t, k, v, path, refusal)
			continue
		}
		o.must(t, 0, "apply", "--auto-approve", path)
		applied = true
		r.follows(t, k, v)
	}
}

// effSpec is the spec of the work queue with key k set to v.
func effSpec(l custodyLayout, k effKey, v string) string {
	delays, extra := "[20s]", ""
	switch {
	case k.name == "retry":
		delays = v
	case v != "":
		extra = fmt.Sprintf("    %s: %s\n", k.name, v)
	}
	return fmt.Sprintf("name: eff\nqueues:\n  - name: %s\n    type: quorum\n    %s\n    retry: {delays: %s}\n%s",
		effQueue, l.yaml, delays, extra)
}

// effPlan is what the test reads of plan --format json (docs/plan-json.md).
type effPlan struct {
	Changes []struct {
		Action  string
		Address struct{ Kind, Name string }
		After   *struct {
			Queue  *struct{ Arguments map[string]any }
			Policy *struct{ Definition map[string]any }
		}
	}
	Diagnostics []struct{ Code, Severity, Message string }
}

// plan runs plan --format json on path and records what it says the
// work queue's arguments and policy become; when the plan refuses (the
// spec does not validate, or an error diagnostic), it returns why and
// false.
func (r *effRun) plan(t *testing.T, path string) (string, bool) {
	t.Helper()
	stdout, stderr, code := rmqtopo(t, "", append([]string{"plan", "--format", "json", path}, r.o.conn()...)...)
	var p effPlan
	if err := json.Unmarshal([]byte(stdout), &p); err != nil {
		if code == 0 {
			t.Fatalf("plan: exit 0 without a JSON plan: %v\n%s", err, stdout)
		}
		return lastLine(stderr), false
	}
	for _, d := range p.Diagnostics {
		if d.Severity == "error" {
			return d.Code + ": " + d.Message, false
		}
	}
	for _, c := range p.Changes {
		r.record(c.Action, c.Address.Kind, c.Address.Name, c.After)
	}
	return "", true
}

// record updates the planned arguments and policy of the work queue with
// one change of a plan.
func (r *effRun) record(action, kind, name string, after *struct {
	Queue  *struct{ Arguments map[string]any }
	Policy *struct{ Definition map[string]any }
}) {
	switch {
	case kind == "queue" && name == effQueue && after != nil && after.Queue != nil:
		r.args = after.Queue.Arguments
	case kind == "policy" && name == contract.QueuePolicy(effQueue) && action == "delete":
		r.policy = nil
	case kind == "policy" && name == contract.QueuePolicy(effQueue) && after != nil && after.Policy != nil:
		r.policy = after.Policy.Definition
	}
}

// refused checks that apply refuses a step the plan refused, and that
// the broker keeps the value of the step before.
func (r *effRun) refused(t *testing.T, k effKey, v, path, why string) {
	t.Helper()
	stdout, stderr, code := rmqtopo(t, "", append([]string{"apply", "--auto-approve", path}, r.o.conn()...)...)
	if code == 0 {
		t.Fatalf("%s=%q: the plan refused (%s) but apply went ahead:\n%s", k.name, v, why, stdout)
	}
	t.Logf("%s=%q refused, as by the plan (apply exit %d): %s", k.name, v, code, lastLine(stderr))
	want, _ := r.planned(k.attr)
	r.waitBroker(t, k, want)
}

// planned is the value of attribute attr that the plans so far said the
// broker uses: the lower of the queue's argument and its policy's key,
// else the broker's default (topology.DefaultArguments), else -1 (none).
func (r *effRun) planned(attr string) (int64, bool) {
	return lowerOf(r.args["x-"+attr], r.policy[attr], r.release, attr)
}

// lowerOf is args_policy_lookup's merge of an argument and a policy key,
// with the release's default where neither is set; ok is false when the
// attribute has no value at all.
func lowerOf(arg, pol any, v topology.Version, attr string) (int64, bool) {
	a, aok := number(arg)
	p, pok := number(pol)
	switch {
	case aok && pok:
		return min(a, p), true
	case aok:
		return a, true
	case pok:
		return p, true
	}
	if d, ok := number(topology.DefaultArguments(v, "quorum")["x-"+attr]); ok {
		return d, true
	}
	return -1, false
}

// number reads a JSON or normalised number.
func number(v any) (int64, bool) {
	switch n := v.(type) {
	case float64:
		return int64(n), true
	case int64:
		return n, true
	case int:
		return int64(n), true
	}
	return 0, false
}

// follows checks an applied step: the value the plan shows is the one
// the broker uses, it is what the spec asks, and the broker follows it.
func (r *effRun) follows(t *testing.T, k effKey, v string) {
	t.Helper()
	want, _ := r.planned(k.attr)
	if shown, ok := number(r.policy[k.attr]); ok && shown != want {
		t.Errorf("%s=%q: the plan shows policy %s: %d, but the queue's argument x-%s: %v is lower and wins (%d): a change the broker ignores",
			k.name, v, k.attr, shown, k.attr, r.args["x-"+k.attr], want)
	}
	if n, ok := k.value(v); ok && n != want {
		t.Errorf("%s=%q: the plan makes the broker use %s %d, not the spec's %d (arguments %v, policy %v)", k.name, v, k.attr, want, n, r.args, r.policy)
	}
	if got := r.waitBroker(t, k, want); got == want && k.check != nil {
		k.check(t, r, want)
	}
}

// effQueueObject is what the management API reports of the work queue.
type effQueueObject struct {
	Arguments json.RawMessage `json:"arguments"`
	Effective json.RawMessage `json:"effective_policy_definition"`
	// DeliveryLimit (4.x) and DelayedRetry (4.3) are the queue's own
	// report of what it applies, refreshed on its tick.
	DeliveryLimit *int64  `json:"delivery_limit"`
	DelayedRetry  *string `json:"delayed_retry"`
}

// object decodes a proplist field: 3.x reports an empty one as [].
func object(raw json.RawMessage) map[string]any {
	m := map[string]any{}
	_ = json.Unmarshal(raw, &m)
	return m
}

// brokerValue is the value of attr the broker uses for the queue q, and
// a description of where it was read.
func (r *effRun) brokerValue(q effQueueObject, attr string) (int64, string) {
	args, pol := object(q.Arguments), object(q.Effective)
	n, _ := lowerOf(args["x-"+attr], pol[attr], r.release, attr)
	where := fmt.Sprintf("argument %v, effective policy %v", args["x-"+attr], pol[attr])
	if attr == contract.KeyDeliveryLimit && q.DeliveryLimit != nil {
		// The queue's own word wins over the merge the test computes.
		n = *q.DeliveryLimit
		where += fmt.Sprintf(", the queue reports delivery_limit %d", n)
	}
	return n, where
}

// delayedAsPlanned reports whether q's delayed retry is the one the
// planned policy sets (4.3: "failed (min: 20000ms, max: 20000ms)"); true
// where the plan sets none.
func (r *effRun) delayedAsPlanned(q effQueueObject) bool {
	lo, ok := number(r.policy[contract.KeyDelayedRetryMin])
	hi, _ := number(r.policy[contract.KeyDelayedRetryMax])
	return !ok || q.DelayedRetry != nil && strings.Contains(*q.DelayedRetry, fmt.Sprintf("min: %dms, max: %dms", lo, hi))
}

// waitBroker polls the queue until the broker uses want for k's attribute
// (the queue's report lags up to a tick, 10 s) and returns the last value
// it read; it fails the test if the broker never does.
func (r *effRun) waitBroker(t *testing.T, k effKey, want int64) int64 {
	t.Helper()
	deadline := waitguard.Deadline(12 * time.Second)
	for {
		var q effQueueObject
		body := r.o.api(t, http.MethodGet, "/api/queues/"+url.PathEscape(r.o.vhost)+"/"+effQueue, "")
		if err := json.Unmarshal(body, &q); err != nil {
			t.Fatal(err)
		}
		got, where := r.brokerValue(q, k.attr)
		if got == want && r.delayedAsPlanned(q) {
			return got
		}
		if time.Now().After(deadline) {
			delayed := "none reported"
			if q.DelayedRetry != nil {
				delayed = *q.DelayedRetry
			}
			t.Errorf("%s: the plan says the broker uses %s %d, the broker uses %d (%s; delayed retry %s, planned policy %v)",
				k.name, k.attr, want, got, where, delayed, r.policy)
			return got
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// checkMaxLength publishes n+2 messages to the work queue and checks it
// holds n, or n+1: a quorum queue's reject-publish overflow (rabbit_fifo)
// refuses a publish only once the queue is over its limit, so it takes
// one more than the limit (seen on 4.3.6 and 3.10.8). Every message it holds must
// have been confirmed and every other one nacked: the publisher is told.
// The broker applies a policy change to a quorum queue through its log,
// a moment after the write, so another count is tried again, up to a
// guard.
func checkMaxLength(t *testing.T, r *effRun, n int64) {
	t.Helper()
	if n < 0 {
		return // no limit: nothing to overflow
	}
	deadline := waitguard.Deadline(5 * time.Second)
	for {
		confirmed := int64(r.publishN(t, int(n)+2))
		held := r.drain(t, effQueue)
		if held == n || held == n+1 {
			if confirmed != held {
				t.Errorf("max-length %d: %d confirmed but %d held", n, confirmed, held)
			}
			t.Logf("max-length %d: %d published, %d confirmed and held", n, n+2, held)
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("max-length %d: the queue held %d of %d published (%d confirmed)", n, held, n+2, confirmed)
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// publishN publishes n messages to the work queue and returns how many
// the broker confirmed (acked, not nacked).
func (r *effRun) publishN(t *testing.T, n int) int {
	t.Helper()
	ch, err := r.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	acked := 0
	for i := range n {
		c, err := ch.PublishWithDeferredConfirm("", effQueue, false, false, amqp.Publishing{DeliveryMode: amqp.Persistent, MessageId: strconv.Itoa(i)})
		if err != nil {
			t.Fatal(err)
		}
		// One at a time: each publish meets the queue as the last left it.
		if c.Wait() {
			acked++
		}
	}
	return acked
}

// drain takes every message of queue and returns how many it took.
func (r *effRun) drain(t *testing.T, queue string) int64 {
	t.Helper()
	ch, err := r.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	var n int64
	for {
		_, ok, err := ch.Get(queue, true)
		if err != nil {
			t.Fatalf("get from %s: %v", queue, err)
		}
		if !ok {
			return n
		}
		n++
	}
}

// checkDeliveryLimit checks the delivery limit where the broker does not
// report it (3.x): a message rejected with requeue every time is
// delivered n+1 times, then dead-lettered into the DLQ.
func checkDeliveryLimit(t *testing.T, r *effRun, n int64) {
	t.Helper()
	if rabbitmq.ProfileFor(r.release).DefaultDeliveryLimit() > 0 {
		t.Logf("delivery-limit %d: read from the queue's own report (delivery_limit); no rejection loop", n)
		return
	}
	r.publishN(t, 1)
	deliveries := r.rejectUntilGone(t, n+5)
	if deliveries != n+1 {
		t.Errorf("delivery-limit %d: the broker delivered a message rejected with requeue %d times, want %d", n, deliveries, n+1)
	}
	r.waitDLQ(t)
}

// rejectUntilGone gets the work queue's one message and rejects it with
// requeue until the queue no longer delivers it, at most most+1 times,
// and returns how many times it was delivered.
func (r *effRun) rejectUntilGone(t *testing.T, most int64) int64 {
	t.Helper()
	ch, err := r.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	var n int64
	for n <= most {
		d, ok, err := ch.Get(effQueue, false)
		if err != nil {
			t.Fatalf("get from %s: %v", effQueue, err)
		}
		if !ok {
			break
		}
		n++
		if err := d.Reject(true); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// waitDLQ waits until the DLQ holds the message the delivery limit
// dead-lettered, and takes it.
func (r *effRun) waitDLQ(t *testing.T) {
	t.Helper()
	deadline := waitguard.Deadline(5 * time.Second)
	for r.drain(t, contract.DeadLetterQueue(effQueue)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the message over its delivery limit never reached the DLQ")
		}
		time.Sleep(200 * time.Millisecond)
	}
}
