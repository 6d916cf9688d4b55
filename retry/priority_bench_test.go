package retry_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/brokertest"
	"github.com/rmqtopo/rmqtopo/retry"
	"github.com/rmqtopo/rmqtopo/topology"
)

// BenchmarkBacklogPriority is issue 43's "every consumer gets its retries
// on time": behind a backlog of 10,000 messages ($RMQTOPO_BENCH_BACKLOG),
// retries that come back into the work queue at contract.RetryPriority
// (no return queue: what auto gives a new quorum queue on 4.0+) against
// the return queue (the baseline), each with retry.Consume and with a
// plain consumer (a loop of New and Handle reading only the work queue,
// as a service of its own or in another language does), in one run. The
// rest is BenchmarkBacklogReturn's: layout shared on quorum queues, one
// in five messages always fails and is retried after each delay of
// $RMQTOPO_BENCH_RETURN_DELAYS (1s,2s), $RMQTOPO_BENCH_HANDLERS (1)
// handlers of 0.5 ms a message; $RMQTOPO_BENCH_CONSUMERS=consume or plain
// runs one kind of consumer only.
//
// Each pair prints p50 and p99 lateness of each delay, the priority's
// ratio to the return queue's, and the goal: p99 arrival within
// 1.2 × delay + 100 ms. On a release without quorum priorities (3.x) the
// priority run is the back of the queue, behind the backlog.
func BenchmarkBacklogPriority(b *testing.B) {
	n, delays := backlogSettings()
	handlers := []int{1}
	if os.Getenv("RMQTOPO_BENCH_HANDLERS") != "" {
		handlers = benchHandlers()
	}
	v, _ := topology.ParseVersion(brokertest.Get(b).Version(b))
	consumers := []bool{false, true}
	switch os.Getenv("RMQTOPO_BENCH_CONSUMERS") {
	case "consume":
		consumers = []bool{false}
	case "plain":
		consumers = []bool{true}
	}
	for k, plain := range consumers {
		for _, h := range handlers {
			var runs [2]backlogRun
			// Every other pair runs the return queue first, so that a
			// machine growing busier does not always favour one design.
			order := []bool{k%2 == 1, k%2 == 0}
			for _, rq := range order {
				i := map[bool]int{false: 0, true: 1}[rq]
				runs[i] = backlogRun{layout: "shared", handlers: h, returnQueue: rq, plain: plain, n: n, delays: delays}
				runs[i].run(b)
				b.Run(priorityName(runs[i]), func(b *testing.B) { runs[i].report(b) })
			}
			priorityVerdict(v, runs)
		}
	}
}

// priorityName names a run of BenchmarkBacklogPriority.
func priorityName(r backlogRun) string {
	design := "priority"
	if r.returnQueue {
		design = "return-queue"
	}
	consumer := "consume"
	if r.plain {
		consumer = "plain"
	}
	return fmt.Sprintf("%s/handlers-%d/%s", consumer, r.handlers, design)
}

// priorityVerdict prints, for the pair (priority, return queue), each
// delay's lateness, the ratio of the two and whether the priority run
// meets the goal.
func priorityVerdict(v topology.Version, runs [2]backlogRun) {
	prio, rq := runs[0], runs[1]
	var parts []string
	met := true
	for k := range prio.late {
		p50, p99 := percentile(prio.late[k], 0.5), percentile(prio.late[k], 0.99)
		b50, b99 := percentile(rq.late[k], 0.5), percentile(rq.late[k], 0.99)
		goal := prio.delay(k)/5 + 100*time.Millisecond
		met = met && p99 <= goal
		parts = append(parts, fmt.Sprintf("after %s: late p50 %v p99 %v (return queue %v, %v; p99 x%.2f), goal p99 ≤ %v",
			prio.delays[k], p50.Round(time.Millisecond), p99.Round(time.Millisecond), b50.Round(time.Millisecond), b99.Round(time.Millisecond),
			ratio(p99, b99), goal))
	}
	word := map[bool]string{true: "MET", false: "NOT MET"}
	// Printed, not logged: make bench shows it without -v.
	fmt.Printf("verdict priority, RabbitMQ %s, %s: %s: on time %s; drained in %.1fs (return queue %.1fs), done in %.1fs (%.1fs)\n",
		v, strings.TrimSuffix(priorityName(prio), "/priority"), strings.Join(parts, "; "), word[met],
		prio.drain.Seconds(), rq.drain.Seconds(), prio.done.Seconds(), rq.done.Seconds())
}

// ratio is a / b, guarding a zero b.
func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// plainConsume is a service's own consumer: one channel on the work queue
// alone with a prefetch of handlers, and as many goroutines settling each
// delivery with a Retrier's Handle, until ctx is cancelled. It never
// reads the return queue.
func plainConsume(ctx context.Context, e *env, h retry.Handler, handlers int, opts []retry.Option) error {
	conn, err := amqp.Dial(e.b.AMQPURLFor(e.vhost))
	if err != nil {
		return err
	}
	defer conn.Close()
	r, err := retry.New(conn, workQueue, opts...)
	if err != nil {
		return err
	}
	defer r.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	if err := ch.Qos(handlers, 0, false); err != nil {
		return err
	}
	deliveries, err := ch.Consume(workQueue, "", false, false, false, false, nil)
	if err != nil {
		return err
	}
	handle := r.Handle(h)
	var wg sync.WaitGroup
	for range handlers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case d, ok := <-deliveries:
					if !ok {
						return
					}
					if _, err := handle(ctx, d); err != nil && ctx.Err() == nil {
						fmt.Fprintf(os.Stderr, "plain consumer: settling %s: %v\n", d.MessageId, err)
					}
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	wg.Wait()
	return nil
}
