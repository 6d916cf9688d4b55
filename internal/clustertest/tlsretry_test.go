package clustertest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/retry"
)

// clientTLS is the TLS configuration a service would build from the test
// CA and the client certificate: it verifies the node and presents the
// certificate the node's AMQPS listener insists on. ServerName is left to
// amqp091, which takes the URL's host (127.0.0.1, in the certificate).
func (e *tlsEnv) clientTLS(t testing.TB) *tls.Config {
	t.Helper()
	ca, err := os.ReadFile(e.caCert)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatalf("no certificate in %s", e.caCert)
	}
	cert, err := tls.LoadX509KeyPair(e.clientCert, e.clientKey)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
}

// tlsRetryDelays is the schedule of the queue of TestRetryHelperOverTLS.
var tlsRetryDelays = []time.Duration{time.Second, 2 * time.Second}

// Fates of the TLS helper test's messages by id: a third fail at every
// attempt, a third fail once, the rest succeed at once.
func tlsAlwaysFails(id int) bool { return id%3 == 0 }
func tlsFailsOnce(id int) bool   { return id%3 == 1 }

// arrival is one delivery to the handler of the TLS helper test.
type arrival struct {
	attempt int
	at      time.Time
	waited  string // the queue of the delivery's newest x-death entry, if expired
}

// tlsRecorder is the handler and observer of the TLS helper test.
type tlsRecorder struct {
	retry.NopObserver
	mu       sync.Mutex
	arrivals map[int][]arrival
	settled  map[int][]retry.Settlement
}

func (r *tlsRecorder) handle(_ context.Context, d amqp.Delivery) error {
	id, err := strconv.Atoi(string(d.Body))
	if err != nil {
		return retry.Permanent(fmt.Errorf("not a message of the test: %q", d.Body))
	}
	attempt, _ := retry.Attempt(d)
	a := arrival{attempt: attempt, at: time.Now()}
	if deaths, _ := d.Headers["x-death"].([]any); len(deaths) > 0 {
		if e, ok := deaths[0].(amqp.Table); ok && e["reason"] == "expired" {
			a.waited, _ = e["queue"].(string)
		}
	}
	r.mu.Lock()
	r.arrivals[id] = append(r.arrivals[id], a)
	r.mu.Unlock()
	if tlsAlwaysFails(id) || (tlsFailsOnce(id) && attempt == contract.FirstAttempt) {
		return errors.New("failing on purpose")
	}
	return nil
}

func (r *tlsRecorder) Settled(s retry.Settlement) {
	id, _ := strconv.Atoi(strings.TrimPrefix(s.MessageID, "m"))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.settled[id] = append(r.settled[id], s)
}

// acked counts the ids the helper acked.
func (r *tlsRecorder) acked() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, ss := range r.settled {
		if slices.ContainsFunc(ss, func(s retry.Settlement) bool { return s.Outcome == retry.Acked }) {
			n++
		}
	}
	return n
}

// TestRetryHelperOverTLS runs the runtime helper as a service would, over
// amqps with mutual TLS: the topology is applied through the CLI over TLS,
// messages are published over amqps (the CA and client certificate named
// in the URL), and retry.Consume, dialling with retry.DialURL and an
// amqp.Config carrying a tls.Config, settles them: a third succeed at once, a third fail once and succeed on their
// retry, which comes back through the 1s wait queue, and a third fail at
// every attempt and end in the DLQ as exhausted.
func TestRetryHelperOverTLS(t *testing.T) {
	t.Parallel() // a node of its own: beside the cluster tests
	e := getTLS(t)
	plain := &brokertest.Broker{MgmtURL: e.node.MgmtURL(), AMQPURL: e.node.AMQPURL(), User: "guest", Password: "guest", Node: e.node}
	vhost := plain.NewVhost(t)
	spec := writeSpec(t, t.TempDir(), "retry.yaml", vhost, "exchanges:\n  - {name: biz, type: topic}\nqueues:\n"+
		"  - name: orders\n    type: quorum\n    layout: shared\n    bindings: [{exchange: biz, routing_key: \"orders.#\"}]\n    retry: {delays: [1s, 2s]}\n")
	must(t, 0, append([]string{"apply", "--auto-approve", spec}, e.flags()...)...)

	// As a service would: one amqp.Config with the TLS configuration.
	amqpsURL := (&brokertest.Broker{AMQPURL: e.amqpsURL, User: "guest", Password: "guest"}).AMQPURLFor(vhost)
	dialer := func(name string) retry.Dialer {
		props := amqp.NewConnectionProperties()
		props.SetClientConnectionName(name)
		return retry.DialURL(amqpsURL, amqp.Config{TLSClientConfig: e.clientTLS(t), Heartbeat: 10 * time.Second, Properties: props})
	}
	consumerName := "tls-retry-" + vhost

	const n = 30
	// The test's hang guard, 2 minutes (unscaled) as before: it needs the
	// 3 s of delays and a little more (4.8 s at load 28).
	limit := waitguard.AtLeast(5*time.Second, 2*time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	// The publisher names the files in the URL instead, which amqp091
	// reads when the config has no TLS configuration.
	pubURL := amqpsURL + "?" + url.Values{"cacertfile": {e.caCert}, "certfile": {e.clientCert}, "keyfile": {e.clientKey}}.Encode()
	pubConn, err := retry.DialURL(pubURL, amqp.Config{})(ctx)
	if err != nil {
		t.Fatalf("dialling %s with the client certificate: %v", e.amqpsURL, err)
	}
	defer pubConn.Close()
	for id := 0; id < n; id++ {
		brokertest.PublishConfirmed(t, pubConn, "biz", "orders.created", amqp.Publishing{
			DeliveryMode: amqp.Persistent, MessageId: fmt.Sprintf("m%d", id), Body: []byte(strconv.Itoa(id))})
	}

	rec := &tlsRecorder{arrivals: map[int][]arrival{}, settled: map[int][]retry.Settlement{}}
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	consumed := make(chan error, 1)
	go func() {
		consumed <- retry.Consume(cctx, dialer(consumerName), "orders", rec.handle, retry.WithPrefetch(8), retry.WithObserver(rec),
			retry.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))))
	}()
	wantAcked, wantDLQ := n-n/3, n/3
	dlq := contract.DeadLetterQueue("orders")
	for rec.acked() < wantAcked || plain.QueueDepth(t, vhost, dlq) < wantDLQ {
		if err := pause(ctx, 200*time.Millisecond); err != nil {
			t.Fatalf("after %v: %d of %d acked, %d of %d in the DLQ", limit, rec.acked(), wantAcked, plain.QueueDepth(t, vhost, dlq), wantDLQ)
		}
	}
	checkTLSConnection(t, plain, consumerName)
	stop()
	if err := <-consumed; err != nil {
		t.Errorf("Consume: %v", err)
	}
	checkTLSOutcomes(t, rec, n)
	checkTLSDLQ(t, pubConn, plain, vhost, n)
}

// checkTLSConnection checks, through the management API, that the
// helper's connection is a TLS one that presented the client certificate.
// Connection statistics can lag a few seconds behind.
func checkTLSConnection(t *testing.T, b *brokertest.Broker, name string) {
	t.Helper()
	var conns []struct {
		Name            string `json:"name"`
		SSL             bool   `json:"ssl"`
		PeerCertSubject string `json:"peer_cert_subject"`
		ClientName      string `json:"user_provided_name"`
	}
	// A guard: the statistics show a connection within their interval
	// (1 s); not a timing goal.
	deadline := waitguard.Deadline(time.Second)
	for {
		getJSON(t, b, "/api/connections?columns=name,ssl,peer_cert_subject,user_provided_name", &conns)
		for _, c := range conns {
			if c.ClientName != name {
				continue
			}
			if !c.SSL || !strings.Contains(c.PeerCertSubject, "CN=client") {
				t.Errorf("connection %s: ssl %t, peer certificate %q; want TLS with the client certificate", c.Name, c.SSL, c.PeerCertSubject)
			}
			t.Logf("the helper's connection %s: ssl %t, peer certificate %q", c.Name, c.SSL, c.PeerCertSubject)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection named %q among %+v", name, conns)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkTLSOutcomes checks what the handler saw and what the helper did
// with every message.
func checkTLSOutcomes(t *testing.T, rec *tlsRecorder, n int) {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var outcomes []string
	viaWait := 0
	for id := 0; id < n; id++ {
		var got []string
		for _, s := range rec.settled[id] {
			got = append(got, fmt.Sprintf("%d:%s", s.Attempt, s.Outcome))
			if s.Err != nil {
				t.Errorf("message %d attempt %d: settling: %v", id, s.Attempt, s.Err)
			}
		}
		want := []string{"1:ack"}
		switch {
		case tlsAlwaysFails(id):
			want = []string{"1:retry", "2:retry", "3:dead-letter"}
		case tlsFailsOnce(id):
			want = []string{"1:retry", "2:ack"}
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("message %d: outcomes %v, want %v", id, got, want)
		}
		outcomes = append(outcomes, got...)
		// Each retry came back through the wait queue of its delay, not
		// before it.
		as := rec.arrivals[id]
		for i := 1; i < len(as); i++ {
			delay := tlsRetryDelays[i-1]
			if w := contract.SharedWaitQueue(delay); as[i].waited != w || as[i].at.Sub(as[i-1].at) < delay {
				t.Errorf("message %d attempt %d: came back through %q after %v; want %q after at least %v",
					id, as[i].attempt, as[i].waited, as[i].at.Sub(as[i-1].at).Round(time.Millisecond), w, delay)
			} else {
				viaWait++
			}
		}
	}
	t.Logf("over amqps: %d settlements, %d retries came back through their wait queue", len(outcomes), viaWait)
}

// checkTLSDLQ drains the DLQ over amqps: it holds the messages that always
// failed, exhausted at their last attempt; the work and wait queues are
// empty.
func checkTLSDLQ(t *testing.T, conn *amqp.Connection, b *brokertest.Broker, vhost string, n int) {
	t.Helper()
	dlq := contract.DeadLetterQueue("orders")
	var ids []int
	// A guard: 10 messages wait in the DLQ (28 ms at load 28).
	for _, d := range brokertest.Drain(t, conn, dlq, b.QueueDepth(t, vhost, dlq), waitguard.For(100*time.Millisecond)) {
		id, _ := strconv.Atoi(string(d.Body))
		ids = append(ids, id)
		reason, _ := d.Headers[contract.HeaderDeadLetterReason].(string)
		attempt, _ := retry.Attempt(d)
		if !tlsAlwaysFails(id) || reason != contract.ReasonExhausted || attempt != len(tlsRetryDelays)+1 {
			t.Errorf("DLQ message %d: reason %q, attempt %d; want only always-failing messages, exhausted at attempt %d",
				id, reason, attempt, len(tlsRetryDelays)+1)
		}
	}
	slices.Sort(ids)
	if len(ids) != n/3 || len(slices.Compact(slices.Clone(ids))) != n/3 {
		t.Errorf("DLQ holds %v; want each of the %d always-failing messages once", ids, n/3)
	}
	for _, q := range []string{"orders", contract.SharedWaitQueue(time.Second), contract.SharedWaitQueue(2 * time.Second)} {
		if d := b.QueueDepth(t, vhost, q); d != 0 {
			t.Errorf("queue %q holds %d messages", q, d)
		}
	}
}
