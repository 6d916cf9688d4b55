package retry

import (
	"errors"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
)

// hasReturnQueue reports, with a passive declare on ch, whether queue has
// a return queue (contract.ReturnQueue). A 404 closes ch, so it is the
// last thing done on it.
func hasReturnQueue(ch *amqp.Channel, queue string) (bool, error) {
	back := contract.ReturnQueue(queue)
	_, err := ch.QueueDeclarePassive(back, true, false, false, false, nil)
	var aerr *amqp.Error
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &aerr) && aerr.Code == amqp.NotFound:
		return false, nil
	}
	return false, fmt.Errorf("retry: checking the return queue %q of queue %q: %w", back, queue, err)
}

// returnTag names Consume's consumer of the return queue.
const returnTag = "rmqtopo-retry-return"

// feed is where Consume's handlers take deliveries from: the return
// queue's (retries whose delay is over) whenever one is waiting, else the
// work queue's. Each handler has its own copy, as next forgets a closed
// channel.
type feed struct {
	ret, work <-chan amqp.Delivery
	// stop ends the consumers: both channels are closed once the
	// deliveries the broker sent meanwhile are in them.
	stop func()
}

// next returns the next delivery, preferring the return queue; ok is
// false once both consumers have ended.
func (f *feed) next() (d amqp.Delivery, ok bool) {
	for f.ret != nil || f.work != nil {
		select {
		case d, ok = <-f.ret:
			if ok {
				return d, true
			}
			f.ret = nil
			continue
		default:
		}
		select {
		case d, ok = <-f.ret:
			if !ok {
				f.ret = nil
				continue
			}
		case d, ok = <-f.work:
			if !ok {
				f.work = nil
				continue
			}
		}
		return d, true
	}
	return amqp.Delivery{}, false
}

// returnPrefetch is the prefetch of the return queue's consumer for a
// work-queue prefetch of n: four times n, at least 32. Every message there
// is due, and handlers take them first, so a deeper buffer costs no
// fairness; with the work queue's prefetch (1 for one handler) each retry
// waited for the broker to see the previous one's ack, and a single
// handler behind a backlog served about 200 retries a second on a quorum
// queue, and its retries came back 0.6-0.8 s late at p99 (docs/benchmarks.md).
func returnPrefetch(n int) int { return min(max(4*n, 32), MaxPrefetch) }

// consumeReturn starts consuming the return queue of c.queue on ch, with
// returnPrefetch, when r found one; a nil channel (which next skips)
// otherwise. The caller sets the work queue's prefetch after it.
func (c *consumer) consumeReturn(ch *amqp.Channel, r *Retrier) (<-chan amqp.Delivery, error) {
	if r.returnQueue() == "" {
		return nil, nil
	}
	if err := ch.Qos(returnPrefetch(c.o.prefetch), 0, false); err != nil {
		return nil, fmt.Errorf("retry: setting the return queue's prefetch: %w", err)
	}
	deliveries, err := ch.Consume(r.returnQueue(), returnTag, false, false, false, false, nil)
	if err != nil {
		return nil, fmt.Errorf("retry: consuming the return queue %q: %w", r.returnQueue(), err)
	}
	return deliveries, nil
}
