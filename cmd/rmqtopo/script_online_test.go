package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/waitguard"
)

// TestScriptsOnline runs the scripts of testdata/script-online against the
// harness broker, each in a vhost of its own. Before a script runs, every
// "@VHOST@" in its files becomes that vhost's name, and the environment
// points rmqtopo at the broker (RMQTOPO_URL and friends), so scripts read
// like a pipeline's steps. Four commands of their own reach the broker
// directly:
//
//	declare QUEUE classic|quorum [dlq]    declare a durable queue, as
//	                                      someone other than rmqtopo would
//	                                      (with dlq: with the arguments
//	                                      rmqtopo gives its DLQs, see
//	                                      declareDLQ)
//	publish QUEUE BODY [HEADER=VALUE...]  publish with confirms to QUEUE
//	                                      through the default exchange
//	depth QUEUE N                         QUEUE holds N ready messages, as
//	                                      a passive declare tells: exact and
//	                                      at once, unlike the statistics
//	waitcount QUEUE N [held]              wait until the management API's
//	                                      statistics show N messages in QUEUE
//	                                      (with held: N dead-letters held)
//
// and "exits" (see scriptExits) checks an exit code. $GUARD is a
// waitguard guard (30s unless RMQTOPO_TEST_GUARD_SCALE says otherwise)
// for a --timeout that only turns a hang into a failure.
func TestScriptsOnline(t *testing.T) {
	b := brokertest.Get(t)
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script-online",
		Setup: func(env *testscript.Env) error {
			vhost := b.NewVhost(t)
			env.Setenv("VHOST", vhost)
			env.Setenv("RMQTOPO_URL", b.MgmtURL)
			env.Setenv("RMQTOPO_AMQP_URL", b.AMQPURL)
			env.Setenv("RMQTOPO_USER", b.User)
			env.Setenv("RMQTOPO_PASSWORD", b.Password)
			// For scripts that unset or override the connection and set it
			// back, or build URLs of their own.
			env.Setenv("BROKER_USER", b.User)
			env.Setenv("BROKER_PASSWORD", b.Password)
			env.Setenv("MGMT_HOSTPORT", strings.TrimPrefix(b.MgmtURL, "http://"))
			if u, err := url.Parse(b.AMQPURL); err == nil {
				env.Setenv("AMQP_HOSTPORT", u.Host)
			}
			// For calls that fail at once (a refused connection: 0.1 s).
			env.Setenv("GUARD", waitguard.For(100*time.Millisecond).String())
			return substituteVhost(env.WorkDir, vhost)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"declare":   func(ts *testscript.TestScript, neg bool, args []string) { scriptDeclare(ts, b, neg, args) },
			"depth":     func(ts *testscript.TestScript, neg bool, args []string) { scriptDepth(ts, b, neg, args) },
			"publish":   func(ts *testscript.TestScript, neg bool, args []string) { scriptPublish(ts, b, neg, args) },
			"waitcount": func(ts *testscript.TestScript, neg bool, args []string) { scriptWaitCount(ts, b, neg, args) },
			"exits":     scriptExits,
		},
	})
}

// scriptExits is "exits N PROGRAM ARGS...": it runs PROGRAM like exec and
// fails unless it exits with code N; stdout and stderr are kept for the
// next commands, as after exec. testscript's "! exec" only knows non-zero.
func scriptExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits N PROGRAM [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		got = ee.ExitCode()
	case err != nil:
		ts.Fatalf("%s: %v", args[1], err)
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}

func substituteVhost(dir, vhost string) error {
	return filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil || !strings.Contains(string(data), "@VHOST@") {
			return err
		}
		return os.WriteFile(path, []byte(strings.ReplaceAll(string(data), "@VHOST@", vhost)), 0o644)
	})
}

func scriptDeclare(ts *testscript.TestScript, b *brokertest.Broker, neg bool, args []string) {
	if neg || len(args) < 2 || len(args) > 3 || (args[1] != "classic" && args[1] != "quorum") || (len(args) == 3 && args[2] != "dlq") {
		ts.Fatalf("usage: declare QUEUE classic|quorum [dlq]")
	}
	ch, done := scriptChannel(ts, b)
	defer done()
	queueArgs := amqp.Table{"x-queue-type": args[1]}
	if len(args) == 3 {
		queueArgs = dlqArgs(args[1])
	}
	_, err := ch.QueueDeclare(args[0], true, false, false, false, queueArgs)
	ts.Check(err)
}

func scriptDepth(ts *testscript.TestScript, b *brokertest.Broker, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: depth QUEUE N")
	}
	want, err := strconv.Atoi(args[1])
	ts.Check(err)
	ch, done := scriptChannel(ts, b)
	defer done()
	q, err := ch.QueueDeclarePassive(args[0], false, false, false, false, nil)
	ts.Check(err)
	if q.Messages != want {
		ts.Fatalf("queue %s holds %d ready messages, want %d", args[0], q.Messages, want)
	}
}

// scriptChannel opens a channel to the script's vhost; done closes it and
// its connection.
func scriptChannel(ts *testscript.TestScript, b *brokertest.Broker) (ch *amqp.Channel, done func()) {
	conn, err := amqp.Dial(b.AMQPURLFor(ts.Getenv("VHOST")))
	ts.Check(err)
	ch, err = conn.Channel()
	if err != nil {
		conn.Close()
		ts.Fatalf("%v", err)
	}
	return ch, func() { conn.Close() }
}

func scriptPublish(ts *testscript.TestScript, b *brokertest.Broker, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: publish QUEUE BODY [HEADER=VALUE...]")
	}
	headers := amqp.Table{}
	for _, h := range args[2:] {
		k, v, ok := strings.Cut(h, "=")
		if !ok {
			ts.Fatalf("publish: header %q: want NAME=VALUE", h)
		}
		headers[k] = v
	}
	ch, done := scriptChannel(ts, b)
	defer done()
	ts.Check(ch.Confirm(false))
	// A guard: a confirm takes milliseconds.
	ctx, cancel := context.WithTimeout(context.Background(), waitguard.For(100*time.Millisecond))
	defer cancel()
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", args[0], true, false,
		amqp.Publishing{Body: []byte(args[1]), Headers: headers, DeliveryMode: amqp.Persistent})
	ts.Check(err)
	ok, err := dc.WaitContext(ctx)
	ts.Check(err)
	if !ok {
		ts.Fatalf("publish: the broker nacked the message")
	}
}

func scriptWaitCount(ts *testscript.TestScript, b *brokertest.Broker, neg bool, args []string) {
	if neg || len(args) < 2 || len(args) > 3 || (len(args) == 3 && args[2] != "held") {
		ts.Fatalf("usage: waitcount QUEUE N [held]")
	}
	count := func(q broker.QueueInfo) int64 { return q.Messages }
	what := "messages"
	if len(args) == 3 {
		count, what = broker.QueueInfo.DeadLettersHeld, "dead-letters held"
	}
	want, err := strconv.ParseInt(args[1], 10, 64)
	ts.Check(err)
	c, err := broker.NewClient(broker.Config{URL: b.MgmtURL, User: b.User, Password: b.Password})
	ts.Check(err)
	var got int64 = -1
	// A guard, as waitCounts' (held_test.go): a held count needs the 1 s
	// TTL to pass, the broker to dead-letter, and a statistics refresh (1 s
	// on the test node), a few seconds on a quiet machine; a loaded 2-CPU
	// machine took 10 s.
	guard := waitguard.For(6 * time.Second)
	for deadline := time.Now().Add(guard); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		q, err := c.GetQueue(context.Background(), ts.Getenv("VHOST"), args[0])
		if err == nil && count(q) == want {
			return
		}
		got = count(q)
	}
	ts.Fatalf("%s", fmt.Sprintf("queue %s: statistics show %d %s after %s, want %d", args[0], got, what, guard, want))
}
