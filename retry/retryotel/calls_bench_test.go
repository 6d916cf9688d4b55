package retryotel_test

import (
	"context"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/rmqtopo/rmqtopo/retry"
	"github.com/rmqtopo/rmqtopo/retry/retryotel"
)

// BenchmarkDeliveryCalls measures, without a broker, what the telemetry
// adds to one delivery: the calls retry.Consume makes for it, sampled and
// unsampled. ack: the tracer's Start, the observer's Settled, the span's
// End. retry: those and the retry copy's (the trace's Publishing, the
// observer's ConfirmsPending +1 and -1, Retried), for a delivery that is
// itself a retry (it carries the previous attempt). Allocations are the
// steadier figure on a busy machine; the end-to-end cost is
// BenchmarkConsumeTracing's.
func BenchmarkDeliveryCalls(b *testing.B) {
	for _, v := range []struct {
		name    string
		sampler sdktrace.Sampler
	}{{"sampled", sdktrace.AlwaysSample()}, {"unsampled", sdktrace.NeverSample()}} {
		for _, retried := range []bool{false, true} {
			name := v.name + "/ack"
			if retried {
				name = v.name + "/retry"
			}
			b.Run(name, func(b *testing.B) { benchDeliveryCalls(b, v.sampler, retried) })
		}
	}
}

func benchDeliveryCalls(b *testing.B, sampler sdktrace.Sampler, retried bool) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}), sdktrace.WithSampler(sampler))
	defer tp.Shutdown(context.Background())
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tel := retryotel.New(retryotel.WithTracerProvider(tp), retryotel.WithMeterProvider(mp))
	d := &amqp.Delivery{Exchange: "", RoutingKey: queue, DeliveryTag: 7, MessageId: "m-1",
		Headers: amqp.Table{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	s := retry.Settlement{Queue: queue, Attempt: 1, Outcome: retry.Acked, Handled: time.Millisecond}
	if retried {
		d.Headers[retryotel.HeaderPreviousAttempt] = "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"
		s.Attempt, s.Outcome = 2, retry.Retried
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, dt := tel.Start(ctx, queue, s.Attempt, d)
		if retried {
			dt.Publishing(amqp.Table{"rmqtopo-attempt": "3"})
			tel.ConfirmsPending(queue, 1)
			tel.ConfirmsPending(queue, -1)
			tel.Retried(queue, 3)
		}
		tel.Settled(s)
		dt.End(s, nil)
	}
}
