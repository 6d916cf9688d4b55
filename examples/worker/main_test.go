package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/retry"
)

// The worker's behaviour against a broker is tested in package retry
// (TestWorker), which builds this command; these tests need none.

func TestParseFlags(t *testing.T) {
	env := func(url string) func(string) string {
		return func(k string) string {
			if k == envURL {
				return url
			}
			return ""
		}
	}
	for _, tc := range []struct {
		name    string
		args    []string
		url     string // in the environment
		want    config
		wantErr string
	}{
		{name: "env url", args: []string{"--queue", "q"}, url: "amqp://e/",
			want: config{url: "amqp://e/", queue: "q", prefetch: 10}},
		{name: "flag beats env", args: []string{"--queue", "q", "--amqp-url", "amqp://f/", "--fail-first", "3", "--reject", "--prefetch", "4",
			"--work", "1s", "--grace", "2s", "--metrics-addr", "127.0.0.1:0", "--traces", "-"}, url: "amqp://e/",
			want: config{url: "amqp://f/", queue: "q", failFirst: 3, reject: true, prefetch: 4, work: time.Second, grace: 2 * time.Second, metrics: "127.0.0.1:0", traces: "-"}},
		{name: "single dash", args: []string{"-queue=q", "-amqp-url=amqp://f/"},
			want: config{url: "amqp://f/", queue: "q", prefetch: 10}},
		{name: "no url", args: []string{"--queue", "q"}, wantErr: "RMQTOPO_AMQP_URL"},
		{name: "no queue", args: nil, url: "amqp://e/", wantErr: "--queue is required"},
		{name: "negative", args: []string{"--queue", "q", "--fail-first", "-1"}, url: "amqp://e/", wantErr: "negative"},
		{name: "prefetch 0", args: []string{"--queue", "q", "--prefetch", "0"}, url: "amqp://e/", wantErr: "--prefetch"},
		{name: "prefetch past 16 bits", args: []string{"--queue", "q", "--prefetch", "65536"}, url: "amqp://e/", wantErr: "from 1 to 65535"},
		{name: "stray argument", args: []string{"--queue", "q", "extra"}, url: "amqp://e/", wantErr: "unexpected"},
		{name: "unknown flag", args: []string{"--queue", "q", "--retries", "3"}, url: "amqp://e/", wantErr: "not defined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseFlags(tc.args, env(tc.url), io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(config{})); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := parseFlags([]string{"--help"}, env(""), io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("--help: %v", err)
	}
}

func TestHandler(t *testing.T) {
	deliver := func(attempt any) amqp.Delivery {
		if attempt == nil {
			return amqp.Delivery{}
		}
		return amqp.Delivery{Headers: amqp.Table{contract.HeaderAttempt: attempt}}
	}
	type verdict string
	judge := func(err error) verdict {
		switch {
		case err == nil:
			return "ok"
		case errors.Is(err, retry.ErrReject):
			return "reject"
		}
		return "fail"
	}
	for _, tc := range []struct {
		c    config
		in   []any
		want []verdict
	}{
		{config{}, []any{nil, "1", "bad"}, []verdict{"ok", "ok", "ok"}},
		{config{failFirst: 2}, []any{nil, "1", "2", "3", "bad"}, []verdict{"fail", "fail", "fail", "ok", "fail"}},
		{config{failFirst: 1_000_000}, []any{nil, "999"}, []verdict{"fail", "fail"}},
		{config{reject: true}, []any{nil, "1"}, []verdict{"reject", "reject"}},
	} {
		h := handler(tc.c)
		var got []verdict
		for _, a := range tc.in {
			got = append(got, judge(h(context.Background(), deliver(a))))
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%+v (-want +got):\n%s", tc.c, diff)
		}
	}
}

func TestRunUsageErrors(t *testing.T) {
	var stderr strings.Builder
	code := run(context.Background(), []string{"--queue", "q"}, func(string) string { return "" }, io.Discard, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "--amqp-url") {
		t.Errorf("run without a URL: exit %d, stderr %q", code, stderr.String())
	}
}
