package broker_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/topology"
)

// fakeAPI answers every request with status and body.
func fakeAPI(t *testing.T, status int, body string) *broker.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	c, err := broker.NewClient(broker.Config{URL: srv.URL, User: "alice", Password: "s3cret-pass"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestHTTPErrors(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		kind   error
		msg    string
	}{
		{401, `{"error":"not_authorized","reason":"Login failed"}`, broker.ErrAuth,
			`authentication failed for user "alice" at http://127.0.0.1:PORT (HTTP 401)`},
		// 3.13 and 4.x word a refused login so.
		{401, `{"error":"not_authorized","reason":"Not_Authorized"}`, broker.ErrAuth,
			`authentication failed for user "alice" at http://127.0.0.1:PORT (HTTP 401)`},
		{401, `{"error":"not_authorised","reason":"Not administrator user"}`, broker.ErrPermission,
			`permission denied for user "alice": Not administrator user (HTTP 401); see "Least privilege" in docs/plan-apply.md for the tags and permissions each command needs`},
		{403, `{"error":"not_authorised","reason":"User not authorised to access virtual host"}`, broker.ErrPermission,
			`permission denied for user "alice": User not authorised to access virtual host (HTTP 403)`},
		// 4.3.6 hides a vhost its user may not access behind a 404; a
		// missing object is "Object Not Found".
		{404, `{"error":"not_found","reason":"Not Found"}`, broker.ErrPermission,
			`permission denied for user "alice": User not authorised to access virtual host (HTTP 404: the broker hides a vhost from a user without permission on it)`},
		{404, `{"error":"Object Not Found","reason":"Not Found"}`, broker.ErrNotFound, `not found (HTTP 404)`},
		{400, `{"error":"bad_request","reason":"inequivalent arg 'x-delivery-limit' for queue 'q1' in vhost 'v1': received '21' but current is '20'"}`, broker.ErrInequivalent,
			`the broker refused: inequivalent arg 'x-delivery-limit' for queue 'q1' in vhost 'v1': received '21' but current is '20' (HTTP 400)`},
		{400, `{"error":"bad_request","reason":"queue 'c1' in vhost 'v1' not empty"}`, broker.ErrNotEmpty,
			`the broker refused: queue 'c1' in vhost 'v1' not empty (HTTP 400)`},
		{500, `{"error":"internal_error","reason":"boom\nsecond line"}`, broker.ErrServer,
			`the management API at http://127.0.0.1:PORT failed with HTTP 500: internal_error: boom second line`},
		{502, `<html>bad gateway</html>`, broker.ErrServer,
			`the management API at http://127.0.0.1:PORT failed with HTTP 502: <html>bad gateway</html>`},
	} {
		c := fakeAPI(t, tc.status, tc.body)
		err := c.PutVhost(context.Background(), "v")
		if !errors.Is(err, tc.kind) {
			t.Errorf("HTTP %d %s: err = %v, want kind %v", tc.status, tc.body, err, tc.kind)
			continue
		}
		got := portRE(err.Error(), c.URL())
		if got != tc.msg {
			t.Errorf("HTTP %d:\n got %s\nwant %s", tc.status, got, tc.msg)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("password in %q", err)
		}
	}
}

func portRE(s, url string) string {
	return strings.ReplaceAll(s, url, "http://127.0.0.1:PORT")
}

// fakeRabbit answers /api/overview as RabbitMQ would and everything else
// with status and body.
func fakeRabbit(t *testing.T, status int, body string) *broker.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/overview":
			w.Write([]byte(`{"rabbitmq_version":"3.10.8","product_name":"RabbitMQ"}`))
			return
		case "/api/vhosts":
			w.Write([]byte(`[{"name":"/","default_queue_type":"undefined"}]`))
			return
		}
		w.WriteHeader(status)
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	c, err := broker.NewClient(broker.Config{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A web server that is not RabbitMQ is one clear error, never "an empty
// broker".
func TestReadRefusesWhatIsNotRabbitMQ(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
	}{
		{404, "<html>Not Found</html>"},
		{200, "<html>hello</html>"},
		{200, `{"some":"json"}`},
	} {
		c := fakeAPI(t, tc.status, tc.body)
		_, err := c.Read(context.Background(), []string{"/"})
		if !errors.Is(err, broker.ErrNotRabbitMQ) || !strings.Contains(err.Error(), "is not a RabbitMQ management API") {
			t.Errorf("HTTP %d %s: err = %v, want ErrNotRabbitMQ", tc.status, tc.body, err)
		}
	}
}

// The first call's 401 is RabbitMQ's answer, not a sign of another
// server: a wrong password reads as one on 3.10 and on 4.x alike, and a
// user without the management tag as a missing permission.
func TestServerSaysWhyLoginFailed(t *testing.T) {
	for _, tc := range []struct {
		body string
		kind error
		msg  string
	}{
		{`{"error":"not_authorized","reason":"Login failed"}`, broker.ErrAuth, `authentication failed for user "alice" at http://127.0.0.1:PORT (HTTP 401)`},
		{`{"error":"not_authorized","reason":"Not_Authorized"}`, broker.ErrAuth, `authentication failed for user "alice" at http://127.0.0.1:PORT (HTTP 401)`},
		{`{"error":"not_authorised","reason":"Not management user"}`, broker.ErrPermission, `permission denied for user "alice": Not management user (HTTP 401)`},
	} {
		c := fakeAPI(t, 401, tc.body)
		_, err := c.Server(context.Background())
		if !errors.Is(err, tc.kind) || errors.Is(err, broker.ErrNotRabbitMQ) {
			t.Errorf("%s: err = %v, want kind %v", tc.body, err, tc.kind)
			continue
		}
		if got := portRE(err.Error(), c.URL()); got != tc.msg {
			t.Errorf("%s:\n got %s\nwant %s", tc.body, got, tc.msg)
		}
	}
}

func TestReadMissingVhost(t *testing.T) {
	c := fakeRabbit(t, 400, `{"error":"bad_request","reason":"vhost_not_found"}`)
	got, err := c.ReadVhost(context.Background(), "nope")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(topology.Topology{}, got); diff != "" {
		t.Errorf("missing vhost (-want +got):\n%s", diff)
	}
}

func TestTransportErrors(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c, _ := broker.NewClient(broker.Config{URL: "http://bob:pw-in-url@" + addr})
	err = c.PutVhost(context.Background(), "v")
	want := "cannot connect to the management API at http://" + addr + ": connection refused — is the management plugin enabled?"
	if !errors.Is(err, broker.ErrUnreachable) || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}

	// A server that never answers: the timeout names itself.
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
	}))
	defer hang.Close()
	defer close(release)
	c, _ = broker.NewClient(broker.Config{URL: hang.URL, Timeout: 100 * time.Millisecond, Flags: broker.Flags{Timeout: "--timeout"}})
	err = c.PutVhost(context.Background(), "v")
	want = "the management API at " + hang.URL + " did not answer within 100ms (--timeout)"
	if !errors.Is(err, broker.ErrTimeout) || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
}

func TestURLUserinfo(t *testing.T) {
	var gotUser, gotPass string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotUser, gotPass, _ = r.BasicAuth()
		w.WriteHeader(204)
	}))
	defer srv.Close()
	u := strings.Replace(srv.URL, "http://", "http://carol:pa%24%24word@", 1)
	c, err := broker.NewClient(broker.Config{URL: u})
	if err != nil {
		t.Fatal(err)
	}
	if c.URL() != srv.URL {
		t.Errorf("URL() = %q, want %q (no credentials)", c.URL(), srv.URL)
	}
	if err := c.PutVhost(context.Background(), "v"); err != nil {
		t.Fatal(err)
	}
	if gotUser != "carol" || gotPass != "pa$$word" {
		t.Errorf("basic auth %q:%q", gotUser, gotPass)
	}
}

// TestPutSurvivesAClosedKeptAliveConnection: a PUT sent on a kept-alive
// connection that the broker closes without an answer (an EOF, seen on
// RabbitMQ 4.0.5) is sent again on a new connection: it succeeds.
func TestPutSurvivesAClosedKeptAliveConnection(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 2 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	c, err := broker.NewClient(broker.Config{URL: srv.URL, User: "alice", Password: "s3cret-pass"})
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"first", "second"} {
		if err := c.DeclareExchange(context.Background(), topology.Exchange{Vhost: "/", Name: name, Type: "topic", Durable: true}); err != nil {
			t.Fatalf("PUT %d: %v", i+1, err)
		}
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("the broker saw %d requests; want 3 (the second sent again)", n)
	}
}
