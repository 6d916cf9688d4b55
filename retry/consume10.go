package retry

import (
	"context"
	"fmt"
	"strings"
	"time"

	amqp10 "github.com/Azure/go-amqp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
)

// subscribe10 consumes a native queue over AMQP 1.0, with the prefetch as
// link credit, and feeds each message as a Delivery whose Acknowledger
// settles it on the link (see ack10). The feed also ends when conn, which
// publishes the DLQ copies, is lost.
func (c *consumer) subscribe10(conn *amqp.Connection, r *Retrier) (feed, func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	n, _ := r.native()
	c10, err := dial10(ctx, conn, n.login)
	if err != nil {
		return feed{}, nil, fmt.Errorf("retry: consuming %q over AMQP 1.0: %w", c.queue, err)
	}
	s, err := c10.NewSession(ctx, nil)
	var rcv *amqp10.Receiver
	if err == nil {
		rcv, err = s.NewReceiver(ctx, queueAddress(c.queue), &amqp10.ReceiverOptions{
			Credit: int32(c.o.prefetch), SettlementMode: amqp10.ReceiverSettleModeFirst.Ptr()})
	}
	if err != nil {
		c10.Close()
		return feed{}, nil, fmt.Errorf("retry: consuming %q over AMQP 1.0: %w", c.queue, err)
	}
	rctx, stop := context.WithCancel(context.Background())
	lost := conn.NotifyClose(make(chan *amqp.Error, 1))
	go func() {
		select {
		case <-lost:
			stop()
		case <-rctx.Done():
		}
	}()
	out := make(chan amqp.Delivery)
	go c.receive10(rctx, rcv, out)
	return feed{work: out, stop: stop}, func() { stop(); c10.Close() }, nil
}

// receive10 feeds out with rcv's messages until ctx ends or the link
// fails, then closes out. A message received after the stop goes back
// unchanged (released).
func (c *consumer) receive10(ctx context.Context, rcv *amqp10.Receiver, out chan<- amqp.Delivery) {
	defer close(out)
	for {
		msg, err := rcv.Receive(ctx, nil)
		if err != nil {
			if ctx.Err() == nil {
				c.log.Warn("retry: AMQP 1.0 consumer lost", "error", err)
			}
			return
		}
		d := delivery10(&ack10{rcv: rcv, msg: msg}, msg)
		select {
		case out <- d:
		case <-ctx.Done():
			_ = d.Nack(false, true)
			return
		}
	}
}

// delivery10 turns an AMQP 1.0 message into the Delivery a Handler takes,
// with the headers an AMQP 0.9.1 consumer of the same message gets from
// RabbitMQ 4.3: its application properties and its "x-" message
// annotations (x-opt-delivery-time, the time a modified retry was held
// until, among them; seen on 4.3.6), but x-exchange and x-routing-key,
// which are its Exchange and RoutingKey. The broker's delivery count is
// contract.HeaderDeliveryCount, as over AMQP 0.9.1.
func delivery10(ack amqp.Acknowledger, msg *amqp10.Message) amqp.Delivery {
	h := amqp.Table{}
	for k, v := range msg.ApplicationProperties {
		h[k] = v
	}
	for k, v := range msg.Annotations {
		if name, ok := k.(string); ok && strings.HasPrefix(name, "x-") && name != "x-exchange" && name != "x-routing-key" {
			h[name] = v
		}
	}
	d := amqp.Delivery{Acknowledger: ack, Headers: h, Body: msg.GetData()}
	if msg.Header != nil {
		if n := msg.Header.DeliveryCount; n > 0 {
			h[contract.HeaderDeliveryCount] = int64(n)
			d.Redelivered = true
		}
		if msg.Header.Durable {
			d.DeliveryMode = amqp.Persistent
		}
	}
	if p := msg.Properties; p != nil {
		d.MessageId = idText(p.MessageID)
		d.CorrelationId = idText(p.CorrelationID)
		d.ContentType, d.ContentEncoding = text(p.ContentType), text(p.ContentEncoding)
		d.ReplyTo = text(p.ReplyTo)
		if p.CreationTime != nil {
			d.Timestamp = *p.CreationTime
		}
	}
	d.Exchange, _ = msg.Annotations["x-exchange"].(string)
	d.RoutingKey, _ = msg.Annotations["x-routing-key"].(string)
	return d
}

func text(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func idText(id any) string {
	if id == nil {
		return ""
	}
	if s, ok := id.(string); ok {
		return s
	}
	return fmt.Sprint(id)
}

// ack10 settles one AMQP 1.0 message as amqp091's Acknowledger would:
// Ack accepts; Nack with requeue releases (RabbitMQ 4.3 neither counts nor
// delays it); Reject with requeue is modified as failed (counted and
// delayed by the queue, as basic.reject); without requeue both reject
// (the broker dead-letters). Modify holds it until a time.
type ack10 struct {
	rcv *amqp10.Receiver
	msg *amqp10.Message
}

func (a *ack10) settle(f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	return f(ctx)
}

func (a *ack10) Ack(uint64, bool) error {
	return a.settle(func(ctx context.Context) error { return a.rcv.AcceptMessage(ctx, a.msg) })
}

func (a *ack10) Nack(_ uint64, _ bool, requeue bool) error {
	if requeue {
		return a.settle(func(ctx context.Context) error { return a.rcv.ReleaseMessage(ctx, a.msg) })
	}
	return a.Reject(0, false)
}

func (a *ack10) Reject(_ uint64, requeue bool) error {
	if requeue {
		return a.settle(func(ctx context.Context) error {
			return a.rcv.ModifyMessage(ctx, a.msg, &amqp10.ModifyMessageOptions{DeliveryFailed: true})
		})
	}
	return a.settle(func(ctx context.Context) error { return a.rcv.RejectMessage(ctx, a.msg, nil) })
}

// Modify returns the message to its queue as failed, held until at, with
// the annotations extra added.
func (a *ack10) Modify(at time.Time, extra map[string]any) error {
	ann := amqp10.Annotations{contract.AnnotationDeliveryTime: at.UnixMilli()}
	for k, v := range extra {
		ann[k] = v
	}
	return a.settle(func(ctx context.Context) error {
		return a.rcv.ModifyMessage(ctx, a.msg, &amqp10.ModifyMessageOptions{DeliveryFailed: true, Annotations: ann})
	})
}
