// Command worker is a runnable consumer of one rmqtopo work queue, built on
// the retry package's Consume. Tests and tooling use it to drive messages
// through a provisioned topology, so its flags and output are kept stable.
//
//	worker --queue NAME [--amqp-url URL] [--fail-first N] [--reject] [--prefetch N]
//	       [--work DURATION] [--grace DURATION] [--metrics-addr ADDR] [--traces PATH]
//
// The AMQP URL comes from --amqp-url or else RMQTOPO_AMQP_URL. Each delivery
// runs a handler that takes --work (returning early if its context is
// cancelled), then fails the first N attempts of every message
// (--fail-first; a large N fails always, so messages end in the DLQ) or
// fails permanently (--reject), and succeeds otherwise. --prefetch
// deliveries are handled concurrently (retry.WithPrefetch). With
// --metrics-addr it serves Prometheus metrics (package retry/retrymetrics)
// at /metrics on that address. With --traces it traces every attempt with
// OpenTelemetry (package retry/retryotel) and writes the spans as JSON, one
// object per span as OpenTelemetry's stdout exporter prints them, to that
// file ("-": stderr): no collector needed. A message's attempts share one
// trace, each linked to the attempt before.
//
// For every delivery the worker prints one JSON line to stdout:
//
//	{"time":"2025-01-02T15:04:05.123456789Z","queue":"work","message_id":"m1","attempt":1,"outcome":"ack"}
//
// attempt is the delivery's attempt number (1 for a first delivery, 0 if
// its attempt header is malformed). outcome is "ack", "retry" (routed by the
// retry exchange to its next attempt), "dead-letter" (sent to the DLQ, with
// "reason": rejected, exhausted or malformed-attempt), or "requeue" (given
// back to the broker unchanged: a copy could not be confirmed, or the
// handler was cancelled by a shutdown). Logs go to stderr.
//
// The worker reconnects when its connection is lost. On SIGTERM or SIGINT
// it stops consuming, requeues what it prefetched, cancels running
// handlers after --grace (their deliveries are requeued unchanged), and
// exits 0.
//
// It parses flags with the standard library's flag package rather than kong,
// like the rest of the CLI: it belongs with the retry helper, whose
// dependency tree must stay light.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	amqp "github.com/rabbitmq/amqp091-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/rmqtopo/rmqtopo/retry"
	"github.com/rmqtopo/rmqtopo/retry/retrymetrics"
	"github.com/rmqtopo/rmqtopo/retry/retryotel"
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
	url         string
	queue       string
	failFirst   int
	reject      bool
	prefetch    int
	work, grace time.Duration
	metrics     string
	traces      string
	crash       bool
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
	fs.IntVar(&c.prefetch, "prefetch", retry.DefaultPrefetch, "consumer prefetch, and deliveries handled concurrently")
	fs.DurationVar(&c.work, "work", 0, "how long the handler works on each delivery")
	fs.DurationVar(&c.grace, "grace", 0, "on SIGTERM, how long running handlers may go on before they are cancelled")
	fs.StringVar(&c.metrics, "metrics-addr", "", "serve Prometheus metrics at http://`ADDR`/metrics")
	fs.StringVar(&c.traces, "traces", "", "trace each attempt with OpenTelemetry, spans as JSON to `PATH` (- for stderr)")
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
	case retry.CheckPrefetch(c.prefetch) != nil:
		return c, fmt.Errorf("--prefetch: %v", retry.CheckPrefetch(c.prefetch))
	case c.work < 0 || c.grace < 0:
		return c, errors.New("--work and --grace must not be negative")
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
	Reason    string `json:"reason,omitempty"`
}

// handler returns the worker's test handler for c.
func handler(c config) retry.Handler {
	return func(ctx context.Context, d amqp.Delivery) error {
		if c.work > 0 {
			t := time.NewTimer(c.work)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
			}
		}
		attempt, ok := retry.Attempt(d)
		switch {
		case c.reject:
			return retry.Permanent(errors.New("rejected by --reject"))
		case !ok:
			if c.failFirst > 0 {
				return errors.New("failing a message with a malformed attempt header (--fail-first)")
			}
		case attempt <= c.failFirst:
			return fmt.Errorf("failing attempt %d of the first %d (--fail-first)", attempt, c.failFirst)
		}
		return nil
	}
}

// printer writes one line per settled delivery.
type printer struct {
	retry.NopObserver
	mu  sync.Mutex
	enc *json.Encoder
}

func (p *printer) Settled(s retry.Settlement) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = p.enc.Encode(line{
		Time: time.Now().UTC().Format(time.RFC3339Nano), Queue: s.Queue, MessageID: s.MessageID,
		Attempt: s.Attempt, Outcome: s.Outcome.String(), Reason: s.Reason,
	})
}

// crashObserver kills the process at the first confirmed copy.
type crashObserver struct {
	retry.NopObserver
	stderr io.Writer
}

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
	opts := []retry.ConsumeOption{
		retry.WithLogger(log), retry.WithPrefetch(c.prefetch), retry.WithShutdownGrace(c.grace),
		retry.WithObserver(&printer{enc: json.NewEncoder(stdout)}),
	}
	if c.crash {
		opts = append(opts, retry.WithObserver(crashObserver{stderr: stderr}))
	}
	if c.metrics != "" {
		m := retrymetrics.New()
		stop, err := serveMetrics(c.metrics, m, log)
		if err != nil {
			return err
		}
		defer stop()
		opts = append(opts, retry.WithObserver(m))
	}
	if c.traces != "" {
		opt, stop, err := tracing(c.traces, stderr)
		if err != nil {
			return err
		}
		defer stop()
		opts = append(opts, opt)
	}
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName("rmqtopo worker " + c.queue)
	dial := retry.DialURL(c.url, amqp.Config{Heartbeat: 10 * time.Second, Properties: props})
	return retry.Consume(ctx, dial, c.queue, handler(c), opts...)
}

// serveMetrics serves m at http://addr/metrics until stop is called.
func serveMetrics(addr string, m prometheus.Collector, log *slog.Logger) (stop func(), err error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(m); err != nil {
		return nil, fmt.Errorf("registering the metrics: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serving metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	log.Info("serving metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	go func() { _ = srv.Serve(ln) }()
	return func() { _ = srv.Close() }, nil
}

// tracing returns retryotel's option with a tracer provider that writes
// every span, as it ends, to path ("-": stderr) with OpenTelemetry's
// stdout exporter, and what flushes and closes it.
func tracing(path string, stderr io.Writer) (retry.Option, func(), error) {
	w, closeFile := stderr, func() error { return nil }
	if path != "-" {
		f, err := os.Create(path)
		if err != nil {
			return nil, nil, fmt.Errorf("--traces: %w", err)
		}
		w, closeFile = f, f.Close
	}
	exp, err := stdouttrace.New(stdouttrace.WithWriter(w))
	if err != nil {
		_ = closeFile()
		return nil, nil, fmt.Errorf("--traces: %w", err)
	}
	// A syncer, not a batcher: each span is written as it ends, which is
	// what someone watching the file wants of an example.
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "rmqtopo-worker"))))
	stop := func() {
		_ = tp.Shutdown(context.Background())
		_ = closeFile()
	}
	return retryotel.New(retryotel.WithTracerProvider(tp)).Option(), stop, nil
}
