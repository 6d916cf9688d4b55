package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/internal/upgrade/bluegreen"
	"github.com/rmqtopo/rmqtopo/spec"
)

// BenchmarkUpgradeMove (issue 42 point 3) moves RMQTOPO_BENCH_MOVE
// messages (default 100,000, 100 bytes each) from a blue 3.10 node to a
// green node of the release under test, between the same two brokers:
// with a dynamic shovel declared by hand (RabbitMQ's shovel plugin, the
// baseline: on-confirm, prefetch 1000) and with `rmqtopo upgrade move`
// (package bluegreen, in process, which reads both brokers, lays out the
// move and declares its own shovels). It runs RMQTOPO_BENCH_MOVE_ROUNDS
// rounds (default 5), each of four moves, ABBA then BAAB in turn, so that
// neither gains from going first or last (a warmer broker, another
// process's load), and reports the median of the rounds' ratios and
// their spread: on a shared machine one round is noise. Each move is
// timed from its start until green holds every message; the move's quiet
// period, which only waits, is reported apart. Goal: the move's rate at
// least 0.9x the shovel's (the median).
func BenchmarkUpgradeMove(b *testing.B) {
	rel, err := brokertest.ReleaseFromEnv()
	if err != nil {
		b.Fatal(err)
	}
	if rel.Series == "3.10" {
		b.Skip("green must run 4.0 or later (the move's shovels run on green)")
	}
	m := newMoveBench(b, rel.Series, envInt("RMQTOPO_BENCH_MOVE", 100_000))
	rounds := envInt("RMQTOPO_BENCH_MOVE_ROUNDS", 5)
	for i := 0; i < b.N; i++ {
		var ratios []float64
		var shovels, moves []time.Duration
		for r := 0; r < rounds; r++ {
			s, mv := m.round(r%2 == 1)
			ratios = append(ratios, s.Seconds()/mv.Seconds()) // rates are n/time
			shovels, moves = append(shovels, s), append(moves, mv)
			fmt.Fprintf(os.Stderr, "BenchmarkUpgradeMove: round %d/%d (%s): shovel plugin %.1f s, move %.1f s (means of two), ratio %.2f\n",
				r+1, rounds, map[bool]string{false: "ABBA", true: "BAAB"}[r%2 == 1], s.Seconds(), mv.Seconds(), ratios[r])
		}
		med, lo, hi := median(ratios), slices.Min(ratios), slices.Max(ratios)
		sr, mr := float64(m.n)/median(seconds(shovels)), float64(m.n)/median(seconds(moves))
		b.ReportMetric(sr, "shovel-msg/s")
		b.ReportMetric(mr, "move-msg/s")
		b.ReportMetric(med, "ratio-median")
		b.ReportMetric(lo, "ratio-min")
		b.ReportMetric(hi, "ratio-max")
		verdict := "met"
		if med < 0.9 {
			verdict = "NOT met"
		}
		fmt.Fprintf(os.Stderr, "BenchmarkUpgradeMove: %d messages, 3.10 -> %s, %d rounds of 4: shovel plugin median %.0f msg/s, rmqtopo upgrade move median %.0f msg/s (its quiet period apart); ratio median %.2f, spread %.2f-%.2f; goal median >= 0.9: %s\n",
			m.n, rel.Series, rounds, sr, mr, med, lo, hi, verdict)
	}
}

// newMoveBench starts blue (3.10) and green (series) with the shovel
// plugin and applies the bench spec on both.
func newMoveBench(b *testing.B, series string, n int) moveBench {
	blue, green := bgNode(b, "3.10", "blue"), bgNode(b, series, "green")
	path := filepath.Join(b.TempDir(), "spec.yaml")
	if err := os.WriteFile(path, []byte(upgradeSpec), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, br := range []*brokertest.Broker{blue, green} {
		if err := run(context.Background(), []string{"apply", "--auto-approve", "--url", br.MgmtURL, path}, nil, io.Discard, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
	files, err := loadSpecs(&env{maxSpecSize: 1 << 20}, []string{path})
	if err != nil {
		b.Fatal(err)
	}
	return moveBench{b: b, n: n, files: files, blue: benchClient(b, blue), green: benchClient(b, green),
		bconn: blue.Dial(b, "/"), gconn: green.Dial(b, "/")}
}

// round runs the four moves of one round, ABBA (shovel first) or BAAB,
// and returns the mean time of each way.
func (m moveBench) round(moveFirst bool) (shovel, move time.Duration) {
	if moveFirst {
		m1 := m.move()
		s1, s2 := m.shovel(), m.shovel()
		m2 := m.move()
		return (s1 + s2) / 2, (m1.moving + m2.moving) / 2
	}
	s1 := m.shovel()
	m1, m2 := m.move(), m.move()
	s2 := m.shovel()
	return (s1 + s2) / 2, (m1.moving + m2.moving) / 2
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func seconds(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = d.Seconds()
	}
	return out
}

// median of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// moveBench moves n messages from blue to green, one way or the other.
type moveBench struct {
	b            *testing.B
	n            int
	files        []*spec.File
	blue, green  *broker.Client
	bconn, gconn *amqp.Connection
}

// shovel fills blue and times a shovel declared by hand until green holds
// every message, then deletes it and empties green.
func (m moveBench) shovel() time.Duration {
	b, ctx := m.b, context.Background()
	fillBlue(b, m.bconn, m.n)
	d := timeUntilGreen(b, m.gconn, m.n, func() {
		src, _ := m.blue.VhostURI(ctx, "/")
		dst, _ := m.green.VhostURI(ctx, "/")
		if err := m.green.PutShovel(ctx, broker.Shovel{Vhost: "/", Name: "bench-baseline", SrcURI: src,
			SrcQueue: "bg.orders", DestURI: dst, DestQueue: "bg.orders", Prefetch: 1000}); err != nil {
			b.Fatal(err)
		}
	})
	if err := m.green.DeleteShovel(ctx, "/", "bench-baseline"); err != nil {
		b.Fatal(err)
	}
	purge(b, m.gconn, "bg.orders")
	return d
}

type moveTimes struct{ moving, total time.Duration }

// move fills blue and times bluegreen.Move until green holds every message
// (moving) and until it returns (total), then empties green.
func (m moveBench) move() moveTimes {
	b := m.b
	fillBlue(b, m.bconn, m.n)
	done := make(chan error, 1)
	start := time.Now()
	moving := timeUntilGreen(b, m.gconn, m.n, func() {
		go func() {
			_, err := bluegreen.Move(context.Background(), bluegreen.Options{Files: m.files, Blue: m.blue, Green: m.green,
				Quiet: 2 * time.Second, Poll: 500 * time.Millisecond, Prefetch: 1000, Log: io.Discard})
			done <- err
		}()
	})
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	total := time.Since(start)
	purge(b, m.gconn, "bg.orders")
	return moveTimes{moving, total}
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
