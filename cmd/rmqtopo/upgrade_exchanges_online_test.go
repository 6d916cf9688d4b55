package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/upgrade"
	"github.com/rmqtopo/rmqtopo/internal/upgrade/live"
)

// exchangePlugins are the plugins with an exchange type that the tested
// releases ship (their plugins/ directories: 3.10.8, 4.0.5 and 4.3.6
// alike); the target's second node enables them all.
var exchangePlugins = []string{"rabbitmq_consistent_hash_exchange", "rabbitmq_random_exchange",
	"rabbitmq_recent_history_exchange", "rabbitmq_jms_topic_exchange", "rabbitmq_sharding"}

// declareExchanges declares on the source an exchange of a plugin's type
// (x-consistent-hash), bound to a queue and from topic.x (exchange to
// exchange), and on 4.0 and later one of the built-in x-local-random.
func declareExchanges(t *testing.T, n *brokertest.Node) {
	put := func(path string, body any) {
		if st := mgmt(t, n, http.MethodPut, path, body, nil); st >= 300 {
			t.Fatalf("the source refused PUT %s: %d", path, st)
		}
	}
	post := func(path string, body any) {
		if st := mgmt(t, n, http.MethodPost, path, body, nil); st >= 300 {
			t.Fatalf("the source refused POST %s: %d", path, st)
		}
	}
	put("/api/exchanges/%2F/hash.x", map[string]any{"type": "x-consistent-hash", "durable": true, "arguments": map[string]any{"hash-header": "k"}})
	post("/api/bindings/%2F/e/hash.x/q/clean.classic", map[string]any{"routing_key": "1"})
	post("/api/bindings/%2F/e/topic.x/e/hash.x", map[string]any{"routing_key": "h.#"})
	if v := nodeVersion(t, n); !strings.HasPrefix(v, "3.") {
		put("/api/exchanges/%2F/rpc.local", map[string]any{"type": "x-local-random", "durable": true})
	}
}

func nodeVersion(t *testing.T, n *brokertest.Node) string {
	var o struct {
		Version string `json:"rabbitmq_version"`
	}
	mgmt(t, n, http.MethodGet, "/api/overview", nil, &o)
	return o.Version
}

func exchangeTypesOf(t *testing.T, n *brokertest.Node) []string {
	var o struct {
		Types []struct {
			Name string `json:"name"`
		} `json:"exchange_types"`
	}
	mgmt(t, n, http.MethodGet, "/api/overview", nil, &o)
	var out []string
	for _, x := range o.Types {
		out = append(out, x.Name)
	}
	return out
}

// declares: whether n takes an exchange of typ (declared, then deleted).
func declares(t *testing.T, n *brokertest.Node, typ string) bool {
	path := "/api/exchanges/%2F/probe." + typ
	ok := mgmt(t, n, http.MethodPut, path, map[string]any{"type": typ, "durable": true}, nil) < 300
	mgmt(t, n, http.MethodDelete, path, nil, nil)
	return ok
}

// exchanges puts the exchange verdicts to the target: the type table to
// both target nodes' /api/overview, UP116 and UP119 to a declare on each
// (refused as installed, taken with the plugin), the preview again with
// --target-url, and UP115, UP117 and UP118 to the exchanges they are
// about.
func (c *previewCheck) exchanges(t *testing.T, src *brokertest.Node, tgt previewTarget) {
	srcTypes, plain, plugged := exchangeTypesOf(t, src), exchangeTypesOf(t, tgt.plain), exchangeTypesOf(t, tgt.plugins)
	t.Logf("asked live: exchange_types of the source %v; of the target as installed %v, with its exchange plugins %v", srcTypes, plain, plugged)
	v, _ := upgrade.Target(nodeVersion(t, tgt.plain))
	sv, _ := upgrade.Target(nodeVersion(t, src))
	for _, x := range upgrade.ExchangeTypes {
		if x.Type == "x-delayed-message" {
			continue // in no package: the second node could not enable it
		}
		builtIn, shipped := upgrade.TypeAt(x.Type, v)
		c.agree("type table: "+x.Type+" built into the target", builtIn, slices.Contains(plain, x.Type))
		c.agree("type table: "+x.Type+" built into or shipped with the target", builtIn || shipped, slices.Contains(plugged, x.Type))
		srcBuiltIn, _ := upgrade.TypeAt(x.Type, sv)
		c.agree("type table: "+x.Type+" built into the source, or enabled there", srcBuiltIn || x.Type == "x-consistent-hash" || x.Type == "x-random", slices.Contains(srcTypes, x.Type))
	}
	for _, typ := range []string{"x-consistent-hash", "x-random"} {
		code, obj := upgrade.CodeExchangeTypePlugin, "exchange hash.x"
		if typ == "x-random" {
			code, obj = upgrade.CodeExchangeTypeUnseen, "exchange-type x-random"
		}
		c.agree(obj+" has "+code+" (needs its plugin)", hasCode(c.vs, obj, code), !declares(t, tgt.plain, typ) && declares(t, tgt.plugins, typ))
	}
	c.agree("exchange rpc.local (x-local-random) clean", len(codesFor(c.vs, "exchange rpc.local")) == 0, declares(t, tgt.plain, "x-local-random"))
	out, stderr, _ := runCLI(t, "upgrade", "preview", "--to", v.String(), "--url", src.MgmtURL(), "--target-url", tgt.plugins.MgmtURL(), "--format", "json")
	for _, code := range []string{upgrade.CodeExchangeTypePlugin, upgrade.CodeExchangeTypeUnseen} {
		c.agree("with --target-url of the node that has the plugins: "+code, strings.Contains(out, `"`+code+`"`), false)
	}
	if !strings.Contains(out, `"verdicts"`) {
		t.Fatalf("preview with --target-url: %s\n%s", stderr, out)
	}
	c.sameArguments(t, src, tgt.plugins)
	c.delayed(t, src, tgt.plugins)
}

// argumentProbes are exchange arguments and bindings the preview gives no
// verdict: each is taken or refused alike by the source and the target
// with the plugins (seen on 3.10.8, 4.0.5 and 4.3.6: the two consistent-
// hash sources at once, a weight that is not a positive integer, and an
// alternate-exchange that is not a string are refused everywhere).
var argumentProbes = []struct{ method, path, body string }{
	{http.MethodPut, "/api/exchanges/%2F/p.ch.header", `{"type":"x-consistent-hash","arguments":{"hash-header":"k"}}`},
	{http.MethodPut, "/api/exchanges/%2F/p.ch.property", `{"type":"x-consistent-hash","arguments":{"hash-property":"message_id"}}`},
	{http.MethodPut, "/api/exchanges/%2F/p.ch.both", `{"type":"x-consistent-hash","arguments":{"hash-header":"k","hash-property":"message_id"}}`},
	{http.MethodPut, "/api/exchanges/%2F/p.ch.bogus", `{"type":"x-consistent-hash","arguments":{"hash-property":"bogus"}}`},
	{http.MethodPost, "/api/bindings/%2F/e/p.ch.header/q/p.q", `{"routing_key":"abc"}`},
	{http.MethodPost, "/api/bindings/%2F/e/p.ch.header/q/p.q", `{"routing_key":"0"}`},
	{http.MethodPost, "/api/bindings/%2F/e/p.ch.header/q/p.q", `{"routing_key":"3"}`},
	{http.MethodPut, "/api/exchanges/%2F/p.rnd", `{"type":"x-random"}`},
	{http.MethodPost, "/api/bindings/%2F/e/p.rnd/q/p.q", `{"routing_key":"a"}`},
	{http.MethodPut, "/api/exchanges/%2F/p.unknown", `{"type":"direct","arguments":{"x-foo":1}}`},
	{http.MethodPut, "/api/exchanges/%2F/p.ae.number", `{"type":"direct","arguments":{"alternate-exchange":5}}`},
	{http.MethodPut, "/api/exchanges/%2F/p.transient", `{"type":"direct","durable":false}`},
	{http.MethodPut, "/api/exchanges/%2F/p.internal", `{"type":"direct","internal":true}`},
	{http.MethodPut, "/api/exchanges/%2F/p.headers", `{"type":"headers"}`},
	{http.MethodPost, "/api/bindings/%2F/e/p.headers/q/p.q", `{"routing_key":"","arguments":{"x-match":"bogus"}}`},
	{http.MethodPost, "/api/bindings/%2F/e/p.headers/q/p.q", `{"routing_key":"","arguments":{"x-match":"any-with-x"}}`},
	{http.MethodPost, "/api/bindings/%2F/e/p.headers/e/p.rnd", `{"routing_key":""}`},
}

// sameArguments: the preview judges no exchange argument, so each probe
// must get the same answer from the source and the target.
func (c *previewCheck) sameArguments(t *testing.T, src, dst *brokertest.Node) {
	for _, n := range []*brokertest.Node{src, dst} {
		mgmt(t, n, http.MethodPut, qpath("p.q"), map[string]any{"durable": true}, nil)
	}
	for _, p := range argumentProbes {
		var body any
		if err := json.Unmarshal([]byte(p.body), &body); err != nil {
			t.Fatal(err)
		}
		s, d := mgmt(t, src, p.method, p.path, body, nil) < 300, mgmt(t, dst, p.method, p.path, body, nil) < 300
		c.agree(fmt.Sprintf("%s %s %s: no verdict (source takes it: %v)", p.method, p.path, p.body, s), true, s == d)
	}
}

// delayed: no release ships the delayed-message plugin, so no source here
// can hold its exchange. The snapshot read live from the source gets one
// added (bound from topic.x and to clean.classic, named as dead-letter
// exchange and alternate exchange), and each verdict on it is put to the
// target node that has every shipped plugin.
func (c *previewCheck) delayed(t *testing.T, src, dst *brokertest.Node) {
	ctx := context.Background()
	bc, err := broker.NewClient(broker.Config{URL: src.MgmtURL(), User: "guest", Password: "guest"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := live.Read(ctx, bc, "/")
	if err != nil {
		t.Fatal(err)
	}
	s.Exchanges = append(s.Exchanges, upgrade.Exchange{Name: "later", Type: "x-delayed-message", Arguments: map[string]any{"x-delayed-type": "direct"}},
		upgrade.Exchange{Name: "ae.user", Type: "direct", Arguments: map[string]any{"alternate-exchange": "later"}})
	s.Bindings = append(s.Bindings, upgrade.Binding{Source: "topic.x", Destination: "later", DestinationType: "exchange", RoutingKey: "d.#"},
		upgrade.Binding{Source: "later", Destination: "clean.classic", DestinationType: "queue", RoutingKey: "clean.classic"})
	s.Queues = append(s.Queues, upgrade.Queue{Name: "dl.later", Type: "classic", Durable: true, Arguments: map[string]any{"x-dead-letter-exchange": "later"}})
	v, _ := upgrade.Target(nodeVersion(t, dst))
	vs := upgrade.JudgeGreen(s, upgrade.Green{Version: v, ExchangeTypes: exchangeTypesOf(t, dst)}).Verdicts
	var codes []string
	for _, vd := range vs {
		if vd.Code >= upgrade.CodeExchangeTypeMissing {
			codes = append(codes, vd.Code+" "+vd.Kind+" "+vd.Name)
		}
	}
	t.Logf("the source's snapshot with a delayed-message exchange added, judged against the target with its plugins: %v", codes)
	c.agree("exchange later refused (UP115)", hasCode(vs, "exchange later", upgrade.CodeExchangeTypeMissing), !declares(t, dst, "x-delayed-message"))
	for obj, path := range map[string]string{
		"binding topic.x -> exchange later":    "/api/bindings/%2F/e/topic.x/e/later",
		"binding later -> queue clean.classic": "/api/bindings/%2F/e/later/q/clean.classic",
	} {
		refused := mgmt(t, dst, http.MethodPost, path, map[string]any{"routing_key": "k"}, nil) >= 300
		c.agree(obj+" refused (UP117)", hasCode(vs, obj, upgrade.CodeExchangeBindingGone), refused)
	}
	ae, dl := lostToMissingExchange(t, dst)
	c.agree("exchange ae.user: alternate exchange later, messages dropped (UP118)", hasCode(vs, "exchange ae.user", upgrade.CodeExchangePointerGone), ae)
	c.agree("queue dl.later: dead-letter exchange later, dead letters dropped (UP118)", hasCode(vs, "queue dl.later", upgrade.CodeExchangePointerGone), dl)
}

// lostToMissingExchange asks dst what it does with an alternate and a
// dead-letter exchange that do not exist: it accepts both declares, and
// a mandatory publish to ae.user comes back unroutable (ae) while a
// rejected message of dl.later reaches no queue of the vhost (dl). The
// control, an alternate exchange that exists, routes.
func lostToMissingExchange(t *testing.T, dst *brokertest.Node) (ae, dl bool) {
	if mgmt(t, dst, http.MethodPut, "/api/exchanges/%2F/ae.user", map[string]any{"type": "direct", "durable": true,
		"arguments": map[string]any{"alternate-exchange": "later"}}, nil) >= 300 ||
		mgmt(t, dst, http.MethodPut, qpath("dl.later"), map[string]any{"durable": true,
			"arguments": map[string]any{"x-dead-letter-exchange": "later"}}, nil) >= 300 {
		return false, false // refused: not accepted-and-dropped
	}
	conn, err := amqp.Dial(dst.AMQPURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	mgmt(t, dst, http.MethodPut, "/api/exchanges/%2F/ae.sink", map[string]any{"type": "fanout", "durable": true}, nil)
	mgmt(t, dst, http.MethodPut, qpath("ae.sink.q"), map[string]any{"durable": true}, nil)
	mgmt(t, dst, http.MethodPost, "/api/bindings/%2F/e/ae.sink/q/ae.sink.q", map[string]any{"routing_key": ""}, nil)
	mgmt(t, dst, http.MethodPut, "/api/exchanges/%2F/ae.ctl", map[string]any{"type": "direct", "durable": true,
		"arguments": map[string]any{"alternate-exchange": "ae.sink"}}, nil)
	ch, _ := conn.Channel()
	returns := ch.NotifyReturn(make(chan amqp.Return, 2))
	if returned(t, ch, returns, "ae.ctl") {
		t.Fatal("the control failed: a message to an exchange whose alternate exchange exists and routes came back unroutable")
	}
	ae = returned(t, ch, returns, "ae.user")
	before := messagesInVhost(t, dst)
	brokertest.PublishConfirmed(t, conn, "", "dl.later", amqp.Publishing{Body: []byte("dl")})
	d, ok := getWithin(t, ch, "dl.later")
	if !ok {
		t.Fatal("dl.later: the message did not come")
	}
	if err := d.Reject(false); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	return ae, messagesInVhost(t, dst) == before
}

// returned publishes a mandatory message to exchange with a key nothing
// binds; true if the broker returns it unroutable. ae.ctl, the control,
// has the alternate exchange ae.sink, a fanout bound to a queue.
func returned(t *testing.T, ch *amqp.Channel, returns <-chan amqp.Return, exchange string) bool {
	if err := ch.Publish(exchange, "nobody", true, false, amqp.Publishing{Body: []byte(exchange)}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-returns:
		return true
	case <-time.After(3 * time.Second):
		return false
	}
}

// messagesInVhost counts the messages of every queue of / by passive
// declares (exact, unlike the statistics).
func messagesInVhost(t *testing.T, n *brokertest.Node) int {
	var qs []struct {
		Name string `json:"name"`
	}
	mgmt(t, n, http.MethodGet, "/api/queues/%2F?columns=name", nil, &qs)
	conn, err := amqp.Dial(n.AMQPURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	total := 0
	for _, q := range qs {
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		if st, err := ch.QueueDeclarePassive(q.Name, false, false, false, false, nil); err == nil {
			total += st.Messages
		}
		ch.Close()
	}
	return total
}
