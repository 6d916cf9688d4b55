package spec

import (
	"strings"
	"testing"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/topology"
)

const returnSpec = `version: 1
levels: {resolution: 100ms, max: 3s}
queues:
  - {name: s, type: quorum, return_queue: true, retry: {delays: [1s]}}
  - {name: p, layout: per-attempt, return_queue: true, retry: {delays: [1s, 2s]}}
  - {name: l, layout: levels, return_queue: true, retry: {delays: [1s]}}
  - {name: plain, layout: per-attempt, retry: {delays: [1s]}}
`

// TestExpandReturnQueue checks where each layout's delayed retries come
// back with return_queue, and that the return queue hands what nobody
// took on to its work queue.
func TestExpandReturnQueue(t *testing.T) {
	f, err := Parse("r.yaml", []byte(returnSpec))
	if err != nil {
		t.Fatal(err)
	}
	top := Expand(f)
	queues := map[string]topology.Args{}
	for _, q := range top.Queues {
		queues[q.Name] = q.Arguments
	}
	for _, q := range []string{"s", "p", "l"} {
		args, ok := queues[contract.ReturnQueue(q)]
		if !ok {
			t.Fatalf("no return queue for %s", q)
		}
		if args["x-dead-letter-exchange"] != "" || args["x-dead-letter-routing-key"] != q ||
			args["x-message-ttl"] != contract.ReturnQueueHandover.Milliseconds() {
			t.Errorf("return queue of %s: %v; want TTL %v dead-lettering to %q", q, args, contract.ReturnQueueHandover, q)
		}
	}
	if args := queues[contract.ReturnQueue("s")]; args["x-queue-type"] != "quorum" || args["x-dead-letter-strategy"] != "at-least-once" {
		t.Errorf("a quorum queue's return queue: %v; want quorum, at least once", args)
	}
	if _, ok := queues[contract.ReturnQueue("plain")]; ok {
		t.Error("a queue without return_queue got one")
	}
	for k, d := range []string{"1s", "2s"} {
		delay, _ := contract.ParseDelay(d)
		name := contract.PerAttemptWaitQueue(contract.ReturnQueue("p"), k+1, delay)
		if args, ok := queues[name]; !ok || args["x-dead-letter-routing-key"] != contract.ReturnQueue("p") {
			t.Errorf("per-attempt wait queue %s: %v, %v; want it returning to p.return", name, ok, args)
		}
		if w, ok := contract.ParseWaitQueue(name); !ok || w.Queue != contract.ReturnQueue("p") {
			t.Errorf("ParseWaitQueue(%s) = %+v, %v", name, w, ok)
		}
	}
	l, _ := f.Spec.Ladder()
	bound := map[string]string{}
	for _, b := range top.Bindings {
		if b.Source == l.DeliveryExchange() {
			bound[b.RoutingKey] = b.Destination
		}
	}
	if got := bound[l.DeliveryPattern("l")]; got != contract.ReturnQueue("l") {
		t.Errorf("ladder delivers l's delays to %q; want l.return", got)
	}
	if got := bound[l.DeliveryPattern("plain")]; got != "plain" {
		t.Errorf("ladder delivers plain's delays to %q; want plain", got)
	}
}

func TestReturnQueueRefusedWithPreset(t *testing.T) {
	_, err := Parse("r.yaml", []byte("version: 1\nqueues:\n  - {name: o, preset: outbox, return_queue: true, retry: {delays: [1s]}}\n"))
	if err == nil || !strings.Contains(err.Error(), "r.yaml:3:") || !strings.Contains(err.Error(), "return_queue is not part of the outbox preset") {
		t.Fatalf("err = %v; want return_queue refused at its line", err)
	}
}
