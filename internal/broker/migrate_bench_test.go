package broker_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/topology"
)

// benchEnvInt reads a positive integer knob of a benchmark.
func benchEnvInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// BenchmarkMigrate measures a migration of a classic queue holding N
// persistent messages to a quorum queue (two moves of N messages, with
// the declares, binding hand-overs and deletes between them) against a
// raw amqp091 loop doing the same two moves (classic → quorum → quorum):
// consume with a prefetch of broker.MoveWindow, publish persistent and
// mandatory with confirms, ack each source once its copy is confirmed.
// Rounds alternate raw and migration; x-raw is the median of the paired
// ratios of messages moved per second.
//
//	RMQTOPO_BENCH_MIGRATE_N=20000 RMQTOPO_BENCH_ROUNDS=3 make bench BENCH=Migrate
func BenchmarkMigrate(b *testing.B) {
	n := benchEnvInt("RMQTOPO_BENCH_MIGRATE_N", 20000)
	rounds := benchEnvInt("RMQTOPO_BENCH_ROUNDS", 3)
	for i := 0; i < b.N; i++ {
		bk := brokertest.Get(b)
		var raw, mig, ratios, batched []float64
		for r := 0; r < rounds; r++ {
			vhost := bk.NewVhost(b)
			lv := connect(b, bk, vhost)
			conn := bk.Dial(b, vhost)
			tr := rawMigration(b, lv, conn, n, 1)
			tm := rmqtopoMigration(b, lv, conn, n)
			tb := rawMigration(b, lv, conn, n, 100)
			raw = append(raw, float64(2*n)/tr.Seconds())
			mig = append(mig, float64(2*n)/tm.Seconds())
			ratios = append(ratios, tr.Seconds()/tm.Seconds())
			batched = append(batched, tb.Seconds()/tm.Seconds())
			b.Logf("round %d: raw %s (%.0f moves/s), migration %s (%.0f moves/s), x-raw %.2f; raw acking every 100: %s, x %.2f",
				r+1, tr.Round(time.Millisecond), raw[r], tm.Round(time.Millisecond), mig[r], ratios[r], tb.Round(time.Millisecond), batched[r])
		}
		b.ReportMetric(medianFloat(raw), "raw-moves/s")
		b.ReportMetric(medianFloat(mig), "migrate-moves/s")
		b.ReportMetric(medianFloat(mig)/2, "migrated-msgs/s")
		b.ReportMetric(medianFloat(ratios), "x-raw")
		b.ReportMetric(medianFloat(batched), "x-raw-batched-acks")
	}
}

func medianFloat(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}

// fillQueue declares q and publishes n persistent messages to it with
// confirms.
func fillQueue(tb testing.TB, l *live, conn *amqp.Connection, q topology.Queue, n int) {
	tb.Helper()
	if err := l.s.DeclareQueue(context.Background(), q); err != nil {
		tb.Fatal(err)
	}
	for from := 0; from < n; from += 5000 {
		if _, err := publishBatch(conn, "", q.Name, from, min(n, from+5000)); err != nil {
			tb.Fatal(err)
		}
	}
	if got := l.b.QueueDepth(tb, l.vhost, q.Name); got != n {
		tb.Fatalf("queue %q holds %d messages, want %d", q.Name, got, n)
	}
}

func rmqtopoMigration(tb testing.TB, l *live, conn *amqp.Connection, n int) time.Duration {
	fillQueue(tb, l, conn, topology.Queue{Vhost: l.vhost, Name: "mig", Durable: true}, n)
	quorum := topology.Queue{Vhost: l.vhost, Name: "mig", Durable: true, Arguments: topology.Args{"x-queue-type": "quorum"}}
	d := timed(func() {
		if err := l.s.MigrateQueue(context.Background(), quorum); err != nil {
			tb.Fatal(err)
		}
	})
	if got := l.b.QueueDepth(tb, l.vhost, "mig"); got != n {
		tb.Fatalf("after the migration the queue holds %d messages, want %d", got, n)
	}
	return d
}

// rawMigration times the raw loop's two moves; ackEvery > 1 acks with
// multiple set, as the migration does, for comparison.
func rawMigration(tb testing.TB, l *live, conn *amqp.Connection, n, ackEvery int) time.Duration {
	src := fmt.Sprintf("raw%d", ackEvery)
	fillQueue(tb, l, conn, topology.Queue{Vhost: l.vhost, Name: src, Durable: true}, n)
	for _, name := range []string{src + ".tmp", src + ".new"} {
		q := topology.Queue{Vhost: l.vhost, Name: name, Durable: true, Arguments: topology.Args{"x-queue-type": "quorum"}}
		if err := l.s.DeclareQueue(context.Background(), q); err != nil {
			tb.Fatal(err)
		}
	}
	return timed(func() {
		for _, mv := range [][2]string{{src, src + ".tmp"}, {src + ".tmp", src + ".new"}} {
			if err := rawMove(conn, mv[0], mv[1], n, ackEvery); err != nil {
				tb.Fatal(err)
			}
		}
	})
}

// rawMove is the plain amqp091 move loop: consume, publish with confirm,
// ack the source once the copy is confirmed, n messages; with ackEvery >
// 1, one ack with multiple set per ackEvery confirms.
func rawMove(conn *amqp.Connection, src, dst string, n, ackEvery int) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		return err
	}
	if err := ch.Qos(broker.MoveWindow, 0, false); err != nil {
		return err
	}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, broker.MoveWindow+1))
	ds, err := ch.Consume(src, "", false, false, false, false, nil)
	if err != nil {
		return err
	}
	var tags []uint64
	for acked := 0; acked < n; {
		select {
		case d := <-ds:
			err := ch.PublishWithContext(context.Background(), "", dst, true, false, amqp.Publishing{
				DeliveryMode: amqp.Persistent, MessageId: d.MessageId, Body: d.Body})
			if err != nil {
				return err
			}
			tags = append(tags, d.DeliveryTag)
		case c := <-confirms:
			if !c.Ack {
				return fmt.Errorf("nack")
			}
			acked++
			if acked%ackEvery != 0 && acked < n {
				continue
			}
			if err := ch.Ack(tags[c.DeliveryTag-1], ackEvery > 1); err != nil {
				return err
			}
		}
	}
	return nil
}
