package broker_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/rmqtopo/rmqtopo/internal/broker"
)

func TestGetJSON(t *testing.T) {
	var gotPath, gotQuery, gotUser string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotQuery = r.URL.EscapedPath(), r.URL.RawQuery
		gotUser, _, _ = r.BasicAuth()
		if strings.HasSuffix(r.URL.Path, "/missing") {
			w.WriteHeader(404)
			w.Write([]byte(`{"error":"Object Not Found","reason":"Not Found"}`))
			return
		}
		w.Write([]byte(`{"name":"q","messages":3}`))
	}))
	defer srv.Close()
	c, err := broker.NewClient(broker.Config{URL: srv.URL, User: "alice", Password: "s3cret-pass"})
	if err != nil {
		t.Fatal(err)
	}
	var q struct {
		Name     string `json:"name"`
		Messages int    `json:"messages"`
	}
	err = c.GetJSON(context.Background(), "/api/queues/%2F/q", url.Values{"columns": {"name,messages"}}, &q)
	if err != nil {
		t.Fatal(err)
	}
	if q.Name != "q" || q.Messages != 3 {
		t.Errorf("decoded %+v", q)
	}
	if gotPath != "/api/queues/%2F/q" || gotQuery != "columns=name%2Cmessages" || gotUser != "alice" {
		t.Errorf("request %s?%s as %q", gotPath, gotQuery, gotUser)
	}

	err = c.GetJSON(context.Background(), "/api/queues/%2F/missing", nil, &q)
	if !errors.Is(err, broker.ErrNotFound) || err.Error() != "not found (HTTP 404)" {
		t.Errorf("missing queue: %v", err)
	}

	c = fakeAPI(t, 403, `{"error":"not_authorised","reason":"User not authorised to access virtual host"}`)
	err = c.GetJSON(context.Background(), "/api/queues/v", nil, &q)
	want := `permission denied for user "alice": User not authorised to access virtual host (HTTP 403)`
	if !errors.Is(err, broker.ErrPermission) || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
}

func TestSecretsIncludeAMQPPassword(t *testing.T) {
	c, err := broker.NewClient(broker.Config{URL: "http://127.0.0.1:1", User: "alice", Password: "s3cret-pass",
		AMQPURL: "amqp://bob:amqp-pa$$@127.0.0.1:5672/"})
	if err != nil {
		t.Fatal(err)
	}
	got := c.Secrets()
	for _, want := range []string{"s3cret-pass", "amqp-pa$$", url.QueryEscape("amqp-pa$$")} {
		if !slices.Contains(got, want) {
			t.Errorf("Secrets() = %q, lacks %q", got, want)
		}
	}
}

// TestDial: the dial of apply's session, exported for the operations
// commands, opens a named connection and classifies a missing vhost.
func TestDial(t *testing.T) {
	t.Parallel()
	l := newLive(t)
	conn, err := l.s.Dial(l.vhost, "test dial")
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()

	missing := l.vhost + "-missing"
	_, err = l.s.Dial(missing, "test dial")
	want := `vhost "` + missing + `" not found (AMQP 530)`
	if !errors.Is(err, broker.ErrVhostNotFound) || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
}
