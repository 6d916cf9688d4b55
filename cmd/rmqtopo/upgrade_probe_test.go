package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/upgrade"
)

// mgmt calls a node's management API as guest; it returns the status.
func mgmt(t *testing.T, n *brokertest.Node, method, path string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, n.MgmtURL()+path, rd)
	req.SetBasicAuth("guest", "guest")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	return resp.StatusCode
}

func qpath(name string) string { return "/api/queues/%2F/" + url.PathEscape(name) }

// declareAll declares the queues and policies on n; it returns what n
// refused (queue or policy name).
func declareAll(t *testing.T, n *brokertest.Node) map[string]bool {
	refused := map[string]bool{}
	for _, q := range previewQueues() {
		if st := mgmt(t, n, http.MethodPut, qpath(q.name), q.body, nil); st >= 300 {
			refused["queue "+q.name] = true
		}
	}
	for name, def := range previewPolicies {
		body := map[string]any{"pattern": "^" + name + `\.`, "definition": def, "apply-to": "queues"}
		if st := mgmt(t, n, http.MethodPut, "/api/policies/%2F/"+name, body, nil); st >= 300 {
			refused["policy "+name] = true
		}
	}
	mgmt(t, n, http.MethodPut, "/api/exchanges/%2F/topic.x", map[string]any{"type": "topic", "durable": true}, nil)
	for queue, key := range previewBindings {
		if st := mgmt(t, n, http.MethodPost, "/api/bindings/%2F/e/topic.x/q/"+queue, map[string]any{"routing_key": key}, nil); st >= 300 {
			refused["binding topic.x -> queue "+queue] = true
		}
	}
	return refused
}

// qosShown opens a channel with basic.qos global=true, prefetch 10,
// and returns what GET /api/channels shows of it: global_prefetch_count
// (-1 when the field is absent) and prefetch_count. 3.10.8 shows 10 and
// 0; 4.0.5 no field and 0; 4.3.6 no field and 10 (a per-consumer
// prefetch).
func qosShown(t *testing.T, n *brokertest.Node) (global, prefetch int) {
	conn, err := amqp.Dial(n.AMQPURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, _ := conn.Channel()
	if err := ch.Qos(10, 0, true); err != nil {
		t.Fatalf("basic.qos global=true: %v", err)
	}
	local := conn.LocalAddr().String()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var cs []map[string]any
		mgmt(t, n, http.MethodGet, "/api/channels", nil, &cs)
		for _, c := range cs {
			if name, _ := c["name"].(string); strings.HasPrefix(name, local+" ") {
				g, ok := c["global_prefetch_count"].(float64)
				if !ok {
					g = -1
				}
				p, _ := c["prefetch_count"].(float64)
				return int(g), int(p)
			}
		}
	}
	t.Fatal("the channel never showed in GET /api/channels")
	return 0, 0
}

// qosPerConsumer: a channel with basic.qos global=true, prefetch 1, and
// two consumers on a classic queue of 4 messages; true if the broker
// delivers 2 unacknowledged messages (a prefetch per consumer), false if 1
// (one for the whole channel).
func qosPerConsumer(t *testing.T, n *brokertest.Node) bool {
	mgmt(t, n, http.MethodPut, qpath("qos.probe"), map[string]any{"durable": true}, nil)
	mgmt(t, n, http.MethodDelete, qpath("qos.probe")+"/contents", nil, nil)
	conn, err := amqp.Dial(n.AMQPURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for range 4 {
		brokertest.PublishConfirmed(t, conn, "", "qos.probe", amqp.Publishing{Body: []byte("q")})
	}
	ch, _ := conn.Channel()
	if err := ch.Qos(1, 0, true); err != nil {
		t.Fatalf("basic.qos global=true: %v", err)
	}
	got := make(chan amqp.Delivery, 4)
	for range 2 {
		ds, err := ch.Consume("qos.probe", "", false, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for d := range ds {
				got <- d
			}
		}()
	}
	time.Sleep(time.Second)
	return len(got) > 1
}

// deliveryLimit is the queue's delivery_limit as GET /api/queues shows it
// once its statistics have come (4.0.5 and 4.3.6: 20 for a quorum queue
// declared without one); -2 when the broker shows none (3.10.8).
func deliveryLimit(t *testing.T, n *brokertest.Node, name string) int {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var q map[string]any
		mgmt(t, n, http.MethodGet, qpath(name), nil, &q)
		if _, ok := q["messages"]; !ok {
			continue // statistics not in yet
		}
		if l, ok := q["delivery_limit"].(float64); ok {
			return int(l)
		}
		return -2
	}
	t.Fatalf("queue %s: no statistics within 30 s", name)
	return 0
}

// nacksCounted: a message in a queue of x-delivery-limit 1, nacked with
// requeue three times; true if the broker then no longer has it.
func nacksCounted(t *testing.T, n *brokertest.Node, queue string) bool {
	conn, err := amqp.Dial(n.AMQPURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, _ := conn.Channel()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	brokertest.PublishConfirmed(t, conn, "", queue, amqp.Publishing{Body: []byte("poison")})
	for range 3 {
		d, ok := getWithin(t, ch, queue)
		if !ok {
			return true
		}
		if err := d.Nack(false, true); err != nil {
			t.Fatal(err)
		}
	}
	d, ok := getWithin(t, ch, queue)
	if ok {
		_ = d.Ack(false)
	}
	return !ok
}

func getWithin(t *testing.T, ch *amqp.Channel, queue string) (amqp.Delivery, bool) {
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		d, ok, err := ch.Get(queue, false)
		if err != nil {
			t.Fatalf("basic.get %s: %v", queue, err)
		}
		if ok {
			return d, true
		}
	}
	return amqp.Delivery{}, false
}

// clientDeathRead: a message published with an x-death of count 5 for
// queue xd.wait expires there into xd.dead; true if the broker's x-death
// then counts on from the client's (6), false if it starts over (1).
func clientDeathRead(t *testing.T, n *brokertest.Node) bool {
	mgmt(t, n, http.MethodPut, qpath("xd.dead"), map[string]any{"durable": true}, nil)
	mgmt(t, n, http.MethodPut, qpath("xd.wait"), map[string]any{"durable": true, "arguments": map[string]any{
		"x-message-ttl": 10, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "xd.dead"}}, nil)
	conn, err := amqp.Dial(n.AMQPURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	death := amqp.Table{"count": int64(5), "queue": "xd.wait", "reason": "expired", "exchange": "",
		"routing-keys": []any{"xd.wait"}, "time": time.Now()}
	brokertest.PublishConfirmed(t, conn, "", "xd.wait", amqp.Publishing{Body: []byte("x"),
		Headers: amqp.Table{"x-death": []any{death}}})
	got := brokertest.Drain(t, conn, "xd.dead", 1, 10*time.Second)
	deaths, _ := got[0].Headers["x-death"].([]any)
	for _, d := range deaths {
		if m, ok := d.(amqp.Table); ok && m["queue"] == "xd.wait" {
			return fmt.Sprint(m["count"]) != "1"
		}
	}
	t.Fatalf("no x-death of xd.wait: %v", got[0].Headers)
	return false
}

// timeoutApplied: a consumer-timeout policy of 1 s on queue (declared
// of type typ), a consumer that never acks; true if the broker cancels
// the consumer or closes its channel within 5 s. 4.3.6 cancels a quorum
// queue's consumer after about 1 s and leaves a classic queue's alone.
func timeoutApplied(t *testing.T, n *brokertest.Node, queue, typ string) bool {
	mgmt(t, n, http.MethodPut, qpath(queue), map[string]any{"durable": true, "arguments": map[string]any{"x-queue-type": typ}}, nil)
	mgmt(t, n, http.MethodPut, "/api/policies/%2F/ct-"+queue, map[string]any{"pattern": "^" + queue + "$", "apply-to": "queues",
		"priority": 10, "definition": map[string]any{"consumer-timeout": 1000}}, nil)
	conn, err := amqp.Dial(n.AMQPURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	brokertest.PublishConfirmed(t, conn, "", queue, amqp.Publishing{Body: []byte("held")})
	ch, _ := conn.Channel()
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	cancelled := ch.NotifyCancel(make(chan string, 1))
	if _, err := ch.Consume(queue, "", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
		return true
	case <-cancelled:
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}

// codesFor are the codes the report gives object (kind name).
func codesFor(vs []upgrade.Verdict, object string) []string {
	var out []string
	for _, v := range vs {
		if v.Kind+" "+v.Name == object {
			out = append(out, v.Code)
		}
	}
	return out
}

func hasCode(vs []upgrade.Verdict, object, code string) bool {
	return slices.Contains(codesFor(vs, object), code)
}

func refusedCode(vs []upgrade.Verdict, object string) bool {
	return slices.ContainsFunc(codesFor(vs, object), func(c string) bool {
		info, _ := upgrade.LookupCode(c)
		return info.Severity == upgrade.SeverityError
	})
}
