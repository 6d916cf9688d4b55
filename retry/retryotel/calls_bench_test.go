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
// adds to one delivery: the three calls retry.Consume makes for it (the
// tracer's Start, the observer's Settled, the span's End), sampled and
// unsampled. Allocations are the steadier figure on a busy machine; the
// end-to-end cost is BenchmarkConsumeTracing's.
func BenchmarkDeliveryCalls(b *testing.B) {
	for _, v := range []struct {
		name    string
		sampler sdktrace.Sampler
	}{{"sampled", sdktrace.AlwaysSample()}, {"unsampled", sdktrace.NeverSample()}} {
		b.Run(v.name, func(b *testing.B) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}), sdktrace.WithSampler(v.sampler))
			defer tp.Shutdown(context.Background())
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			tel := retryotel.New(retryotel.WithTracerProvider(tp), retryotel.WithMeterProvider(mp))
			d := &amqp.Delivery{Exchange: "", RoutingKey: queue, DeliveryTag: 7, MessageId: "m-1",
				Headers: amqp.Table{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				_, dt := tel.Start(ctx, queue, 1, d)
				s := retry.Settlement{Queue: queue, Attempt: 1, Outcome: retry.Acked, Handled: time.Millisecond}
				tel.Settled(s)
				dt.End(s, nil)
			}
		})
	}
}
