// Command worker is a runnable consumer of one rmqtopo work queue, built on
// the retry package. Tests and tooling use it to drive messages through a
// provisioned topology, so its flags and output are kept stable.
//
//	worker --queue NAME [--amqp-url URL] [--fail-first N] [--reject] [--prefetch N]
//
// The AMQP URL comes from --amqp-url or else RMQTOPO_AMQP_URL. Each delivery
// runs a handler that fails the first N attempts of every message
// (--fail-first; a large N fails always, so messages end in the DLQ) or
// fails permanently (--reject), and succeeds otherwise. Up to --prefetch
// deliveries are handled concurrently.
//
// For every delivery the worker prints one JSON line to stdout:
//
//	{"time":"2025-01-02T15:04:05.123456789Z","queue":"work","message_id":"m1","attempt":0,"outcome":"ack"}
//
// attempt is the delivery's retry number (0 for a first delivery, -1 if its
// attempt header is malformed). outcome is "ack", "retry" (handed to the
// retry exchange, which dead-letters it past the last retry) or
// "dead-letter" (sent to the DLQ by the worker: rejected, unroutable or
// malformed), or "requeue" when the copy could not be confirmed and the
// broker will deliver the message again. Logs go to stderr.
//
// On SIGTERM or SIGINT the worker stops consuming, lets in-flight handlers
// finish, closes and exits 0.
//
// It parses flags with the standard library's flag package rather than kong,
// like the rest of the CLI: it belongs with the retry helper, whose
// dependency tree must stay light (amqp091-go and the standard library).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/retry"
)

// Environment variables the worker reads.
const (
	envURL = "RMQTOPO_AMQP_URL"
	// envCrashAfterConfirm is a test hook, not a feature: when "1", the
	// worker SIGKILLs itself right after the broker confirmed its first
	// retry or dead-letter copy and before the original is acked, to prove
	// that such a crash gives one duplicate and no loss.
	envCrashAfterConfirm = "RMQTOPO_WORKER_CRASH_AFTER_CONFIRM"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

type config struct {
	url       string
	queue     string
	failFirst int
	reject    bool
	prefetch  int
	crash     bool
}

// parseFlags reads the command line and environment. It returns an error
// for flag.ErrHelp too.
func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.url, "amqp-url", "", "AMQP URL of the broker and vhost (default $"+envURL+")")
	fs.StringVar(&c.queue, "queue", "", "work queue to consume (required)")
	fs.IntVar(&c.failFirst, "fail-first", 0, "fail the first `N` attempts of each message, then succeed")
	fs.BoolVar(&c.reject, "reject", false, "fail every message permanently (straight to the DLQ)")
	fs.IntVar(&c.prefetch, "prefetch", 10, "deliveries handled concurrently (consumer prefetch)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.url == "" {
		c.url = getenv(envURL)
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected arguments: %q", fs.Args())
	case c.url == "":
		return c, fmt.Errorf("no broker: set --amqp-url or %s", envURL)
	case c.queue == "":
		return c, errors.New("--queue is required")
	case c.failFirst < 0:
		return c, errors.New("--fail-first must not be negative")
	case c.prefetch < 1:
		return c, errors.New("--prefetch must be at least 1")
	}
	c.crash = getenv(envCrashAfterConfirm) == "1"
	return c, nil
}

// line is one delivery's report on stdout.
type line struct {
	Time      string `json:"time"`
	Queue     string `json:"queue"`
	MessageID string `json:"message_id"`
	Attempt   int    `json:"attempt"`
	Outcome   string `json:"outcome"`
}

// handler returns the worker's test handler for c.
func handler(c config) retry.Handler {
	return func(_ context.Context, d amqp.Delivery) error {
		attempt, ok := retry.Attempt(d)
		switch {
		case c.reject:
			return retry.Permanent(errors.New("rejected by --reject"))
		case !ok:
			if c.failFirst > 0 {
				return errors.New("failing a message with a malformed attempt header (--fail-first)")
			}
		case attempt < c.failFirst:
			return fmt.Errorf("failing attempt %d of the first %d (--fail-first)", attempt, c.failFirst)
		}
		return nil
	}
}

// crashObserver kills the process at the first confirmed copy.
type crashObserver struct{ stderr io.Writer }

func (o crashObserver) Retried(string, int)         { o.crash() }
func (o crashObserver) DeadLettered(string, string) { o.crash() }
func (o crashObserver) crash() {
	fmt.Fprintf(o.stderr, "worker: %s=1: killing myself after a confirm, before the ack\n", envCrashAfterConfirm)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // never ack
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	c, err := parseFlags(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "worker: %v\n", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if err := consume(ctx, c, log, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "worker: %v\n", err)
		return 1
	}
	return 0
}

func consume(ctx context.Context, c config, log *slog.Logger, stdout, stderr io.Writer) error {
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName("rmqtopo worker " + c.queue)
	conn, err := amqp.DialConfig(c.url, amqp.Config{Heartbeat: 10 * time.Second, Properties: props})
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer conn.Close()

	opts := []retry.Option{retry.WithLogger(log)}
	if c.crash {
		opts = append(opts, retry.WithObserver(crashObserver{stderr}))
	}
	r, err := retry.New(conn, c.queue, opts...)
	if err != nil {
		return err
	}
	defer r.Close()

	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("opening the consumer channel: %w", err)
	}
	defer ch.Close()
	if err := ch.Qos(c.prefetch, 0, false); err != nil {
		return fmt.Errorf("setting prefetch: %w", err)
	}
	const tag = "rmqtopo-worker"
	deliveries, err := ch.Consume(c.queue, tag, false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("consuming %q: %w", c.queue, err)
	}
	lost := conn.NotifyClose(make(chan *amqp.Error, 1))

	process := r.Handle(handler(c))
	var (
		outMu sync.Mutex
		enc   = json.NewEncoder(stdout)
		wg    sync.WaitGroup
	)
	// Handlers run to completion even after a signal: only consuming stops.
	work := context.WithoutCancel(ctx)
	for range c.prefetch {
		wg.Go(func() {
			for d := range deliveries {
				attempt, ok := retry.Attempt(d)
				if !ok {
					attempt = -1
				}
				out, err := process(work, d)
				if err != nil {
					log.Error("settling a delivery failed", "message_id", d.MessageId, "outcome", out, "error", err)
				}
				outMu.Lock()
				_ = enc.Encode(line{
					Time:      time.Now().UTC().Format(time.RFC3339Nano),
					Queue:     c.queue,
					MessageID: d.MessageId,
					Attempt:   attempt,
					Outcome:   out.String(),
				})
				outMu.Unlock()
			}
		})
	}

	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()

	var runErr error
	select {
	case <-finished:
		select {
		case e := <-lost:
			runErr = fmt.Errorf("connection lost: %v", e)
		default:
			runErr = errors.New("the broker stopped the consumer (queue deleted, or channel closed)")
		}
	case <-ctx.Done():
		log.Info("stopping: cancelling the consumer and letting in-flight handlers finish")
		// Deliveries already prefetched are still handed out, then the
		// channel of deliveries closes and the handlers return.
		if err := ch.Cancel(tag, false); err != nil {
			runErr = fmt.Errorf("cancelling the consumer: %w", err)
		}
	case e := <-lost:
		runErr = fmt.Errorf("connection lost: %v", e)
	}
	<-finished
	return runErr
}
