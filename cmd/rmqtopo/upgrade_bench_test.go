package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/upgrade"
)

// BenchmarkUpgradeMove (issue 42 point 3) moves RMQTOPO_BENCH_MOVE
// messages (default 100,000, 100 bytes each) from a blue 3.10 node to a
// green node of the release under test, twice in one run between the
// same two brokers: with a dynamic shovel declared by hand (RabbitMQ's
// shovel plugin, the baseline: on-confirm, prefetch 1000) and with
// `rmqtopo upgrade move` (package upgrade, in process, which reads both
// brokers, lays out the move and declares its own shovels). Each is timed
// from its start until green holds every message; the move's quiet
// period, which only waits, is reported apart. Goal: the move's rate at
// least 0.9x the shovel's.
func BenchmarkUpgradeMove(b *testing.B) {
	rel, err := brokertest.ReleaseFromEnv()
	if err != nil {
		b.Fatal(err)
	}
	if rel.Series == "3.10" {
		b.Skip("green must run 4.0 or later (the move's shovels run on green)")
	}
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("RMQTOPO_BENCH_MOVE")); err == nil && v > 0 {
		n = v
	}
	blue, green := bgNode(b, "3.10", "blue"), bgNode(b, rel.Series, "green")
	path := filepath.Join(b.TempDir(), "spec.yaml")
	if err := os.WriteFile(path, []byte(upgradeSpec), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, br := range []*brokertest.Broker{blue, green} {
		if err := run(context.Background(), []string{"apply", "--auto-approve", "--url", br.MgmtURL, path}, nil, io.Discard, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
	bc, gc := benchClient(b, blue), benchClient(b, green)
	bconn, gconn := blue.Dial(b, "/"), green.Dial(b, "/")
	for i := 0; i < b.N; i++ {
		fillBlue(b, bconn, n)
		shovel := timeUntilGreen(b, gconn, n, func() {
			src, _ := bc.VhostURI(context.Background(), "/")
			dst, _ := gc.VhostURI(context.Background(), "/")
			if err := gc.PutShovel(context.Background(), broker.Shovel{Vhost: "/", Name: "bench-baseline", SrcURI: src,
				SrcQueue: "bg.orders", DestURI: dst, DestQueue: "bg.orders", Prefetch: 1000}); err != nil {
				b.Fatal(err)
			}
		})
		if err := gc.DeleteShovel(context.Background(), "/", "bench-baseline"); err != nil {
			b.Fatal(err)
		}
		purge(b, gconn, "bg.orders")
		fillBlue(b, bconn, n)
		files, err := loadSpecs(&env{maxSpecSize: 1 << 20}, []string{path})
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan error, 1)
		start := time.Now()
		move := timeUntilGreen(b, gconn, n, func() {
			go func() {
				_, err := upgrade.Move(context.Background(), upgrade.Options{Files: files, Blue: bc, Green: gc,
					Quiet: 2 * time.Second, Poll: 500 * time.Millisecond, Prefetch: 1000, Log: io.Discard})
				done <- err
			}()
		})
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		total := time.Since(start)
		purge(b, gconn, "bg.orders")
		sr, mr := float64(n)/shovel.Seconds(), float64(n)/move.Seconds()
		b.ReportMetric(sr, "shovel-msg/s")
		b.ReportMetric(mr, "move-msg/s")
		b.ReportMetric(mr/sr, "ratio")
		verdict := "met"
		if mr/sr < 0.9 {
			verdict = "not met"
		}
		fmt.Fprintf(os.Stderr, "BenchmarkUpgradeMove: %d messages, 3.10 -> %s: shovel plugin %.1f s (%.0f msg/s); rmqtopo upgrade move %.1f s (%.0f msg/s; %.1f s with its 2 s quiet period); ratio %.2f, goal >= 0.9: %s\n",
			n, rel.Series, shovel.Seconds(), sr, move.Seconds(), mr, total.Seconds(), mr/sr, verdict)
	}
}

func benchClient(b *testing.B, br *brokertest.Broker) *broker.Client {
	c, err := broker.NewClient(broker.Config{URL: br.MgmtURL, AMQPURL: br.AMQPURL, User: "guest", Password: "guest"})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// fillBlue publishes n messages of 100 bytes to bg.orders, 1,000 in
// flight, each confirmed.
func fillBlue(b *testing.B, conn *amqp.Connection, n int) {
	ch, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 100)
	for from := 0; from < n; from += 1000 {
		var waits []*amqp.DeferredConfirmation
		for i := from; i < min(n, from+1000); i++ {
			dc, err := ch.PublishWithDeferredConfirm("", "bg.orders", false, false,
				amqp.Publishing{MessageId: strconv.Itoa(i), DeliveryMode: amqp.Persistent, Body: body})
			if err != nil {
				b.Fatal(err)
			}
			waits = append(waits, dc)
		}
		for _, dc := range waits {
			if !dc.Wait() {
				b.Fatal("blue nacked a publish")
			}
		}
	}
}

// timeUntilGreen runs start and returns how long until green's bg.orders
// holds n ready messages (it has no consumer, so that is exact).
func timeUntilGreen(b *testing.B, conn *amqp.Connection, n int, start func()) time.Duration {
	t0 := time.Now()
	start()
	deadline := t0.Add(20 * time.Minute)
	for time.Now().Before(deadline) {
		ch, err := conn.Channel()
		if err != nil {
			b.Fatal(err)
		}
		q, err := ch.QueueDeclarePassive("bg.orders", true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
		ch.Close()
		if err != nil {
			b.Fatal(err)
		}
		if q.Messages >= n {
			return time.Since(t0)
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Fatalf("green did not get %d messages in 20 minutes", n)
	return 0
}

func purge(b *testing.B, conn *amqp.Connection, queue string) {
	ch, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	defer ch.Close()
	if _, err := ch.QueuePurge(queue, false); err != nil {
		b.Fatal(err)
	}
}
