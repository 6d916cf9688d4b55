package retry

import (
	"context"
	"errors"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
)

// A native queue of the in-place shape (contract's inplace.go) may change
// its schedule while Consume runs: rmqtopo updates the queue's policy and
// its schedule binding, and touches neither the queue nor a message.
// Consume reads the binding at each connection and again every
// WithScheduleRefresh (DefaultScheduleRefresh), so that its decisions
// follow: the number of retries (it dead-letters the last failure itself)
// and, on the modified route, each delay.

// DefaultScheduleRefresh is how often Consume reads a native queue's
// schedule again.
const DefaultScheduleRefresh = 30 * time.Second

// WithScheduleRefresh sets how often Consume reads the schedule of a
// native queue whose schedule may change in place (default
// DefaultScheduleRefresh); 0 or less reads it only at each connection.
func WithScheduleRefresh(d time.Duration) ConsumeOption {
	return consumeOnly(func(c *consumeOptions) { c.refresh = d })
}

// errRouteChanged ends a session whose queue's schedule moved from the
// reject route to the modified route, which needs the AMQP 1.0 consumer:
// Consume connects again at once.
var errRouteChanged = errors.New("the native queue's schedule moved to the modified route (AMQP 1.0)")

// watchSchedule reads r's schedule every c.o.refresh until ctx ends, and
// stores each change; it calls restart when the change needs another
// consumer (reject to modified). A failed read keeps the schedule.
func (c *consumer) watchSchedule(ctx context.Context, conn *amqp.Connection, r *Retrier, restart context.CancelCauseFunc) {
	if n, _ := r.native(); !n.apart || c.o.refresh <= 0 {
		return
	}
	t := time.NewTicker(c.o.refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := c.refreshSchedule(ctx, conn, r); err != nil {
			if errors.Is(err, errRouteChanged) {
				restart(err)
				return
			}
			c.log.Warn("retry: reading the queue's schedule again; keeping the one in force", "error", err)
		}
	}
}

// refreshSchedule reads r's schedule once and stores it if it changed. A
// session on the modified route follows a reject-route schedule over
// AMQP 1.0 (the modified outcome's delivery time gives each delay); one
// on the reject route cannot follow a modified-route schedule:
// errRouteChanged.
func (c *consumer) refreshSchedule(ctx context.Context, conn *amqp.Connection, r *Retrier) error {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	native, _ := r.native()
	c10, err := dial10(ctx, conn, native.login)
	if err != nil {
		return err
	}
	defer c10.Close()
	cur := r.schedule.Load()
	n, err := schedule(ctx, c10, c.queue, cur)
	if err != nil || n == cur {
		return err
	}
	switch {
	case native.schedule.Route == contract.RouteModified:
		m := *n
		m.Route = contract.RouteModified
		n = &m
	case n.Route == contract.RouteModified:
		return errRouteChanged
	}
	r.schedule.Store(n)
	c.log.Info("retry: the queue's schedule changed", "retries", n.DeliveryLimit, "route", n.Route, "delays", n.Delays)
	return nil
}
