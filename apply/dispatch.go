package apply

import (
	"context"
	"errors"
	"fmt"

	"github.com/rmqtopo/rmqtopo/apply/target"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

// do carries out one change, by the kind of object it acts on.
func (r *runner) do(ctx context.Context, c plan.Change) error {
	switch c.Address.Kind {
	case topology.KindVhost:
		return r.doVhost(ctx, c)
	case topology.KindExchange:
		return r.doExchange(ctx, c)
	case topology.KindQueue:
		return r.doQueue(ctx, c)
	case topology.KindBinding:
		return r.doBinding(ctx, c)
	case topology.KindPolicy:
		return r.doPolicy(ctx, c)
	}
	return errNoSuchOperation(c)
}

func errNoSuchOperation(c plan.Change) error {
	return fmt.Errorf("cannot %s a %s in place: RabbitMQ has no such operation", c.Action, c.Address.Kind)
}

func (r *runner) doVhost(ctx context.Context, c plan.Change) error {
	if c.Action != plan.Create {
		return fmt.Errorf("rmqtopo only creates vhosts; cannot %s one", c.Action)
	}
	if err := r.t.PutVhost(ctx, c.Address.Name); err != nil {
		return err
	}
	if r.opts.VhostCreated != nil {
		return r.opts.VhostCreated(ctx, c.Address.Name)
	}
	return nil
}

func (r *runner) doExchange(ctx context.Context, c plan.Change) error {
	a, after := c.Address, exchangeOf(c.After)
	switch c.Action {
	case plan.Delete:
		return r.t.DeleteExchange(ctx, a.Vhost, a.Name)
	case plan.Create, plan.Replace:
		if after == nil {
			return errMalformed
		}
		if c.Action == plan.Replace {
			if err := r.t.DeleteExchange(ctx, a.Vhost, a.Name); err != nil {
				return err
			}
		}
		return r.t.DeclareExchange(ctx, *after)
	}
	return errNoSuchOperation(c)
}

// doQueue guards every queue delete with if-empty unless destruction was
// allowed, and a retired queue's always: it is deleted only once empty.
func (r *runner) doQueue(ctx context.Context, c plan.Change) error {
	before, after := queueOf(c.Before), queueOf(c.After)
	if before == nil {
		before = &topology.Queue{Vhost: c.Address.Vhost, Name: c.Address.Name}
	}
	ifEmpty := !r.opts.AllowDestroy || c.Why() == plan.WhyRetired
	switch c.Action {
	case plan.Migrate:
		return r.doMigrate(ctx, c)
	case plan.Delete:
		return r.t.DeleteQueue(ctx, *before, ifEmpty)
	case plan.Create, plan.Replace:
		if after == nil {
			return errMalformed
		}
		if c.Action == plan.Replace {
			if err := r.t.DeleteQueue(ctx, *before, ifEmpty); err != nil {
				return err
			}
		}
		return r.t.DeclareQueue(ctx, *after)
	}
	return errNoSuchOperation(c)
}

func (r *runner) doBinding(ctx context.Context, c plan.Change) error {
	before, after := bindingOf(c.Before), bindingOf(c.After)
	switch c.Action {
	case plan.Create:
		if after == nil {
			return errMalformed
		}
		return r.t.Bind(ctx, *after)
	case plan.Replace:
		if before == nil || after == nil {
			return errMalformed
		}
		if err := r.t.Unbind(ctx, *before); err != nil {
			return err
		}
		return r.t.Bind(ctx, *after)
	case plan.Delete:
		if before == nil {
			return errMalformed
		}
		return r.t.Unbind(ctx, *before)
	}
	return errNoSuchOperation(c)
}

func (r *runner) doPolicy(ctx context.Context, c plan.Change) error {
	after := policyOf(c.After)
	switch c.Action {
	case plan.Create, plan.Update, plan.Replace:
		if after == nil {
			return errMalformed
		}
		return r.t.PutPolicy(ctx, *after)
	case plan.Delete:
		return r.t.DeletePolicy(ctx, c.Address.Vhost, c.Address.Name)
	}
	return errNoSuchOperation(c)
}

var errMalformed = errors.New("malformed plan: the change lacks the object it acts on")

func exchangeOf(o *plan.Object) *topology.Exchange {
	if o == nil {
		return nil
	}
	return o.Exchange
}

func queueOf(o *plan.Object) *topology.Queue {
	if o == nil {
		return nil
	}
	return o.Queue
}

func bindingOf(o *plan.Object) *topology.Binding {
	if o == nil {
		return nil
	}
	return o.Binding
}

func policyOf(o *plan.Object) *topology.Policy {
	if o == nil {
		return nil
	}
	return o.Policy
}

var errCannotMigrate = errors.New("this target cannot migrate queues")

// doMigrate runs a Migrate change.
func (r *runner) doMigrate(ctx context.Context, c plan.Change) error {
	after := queueOf(c.After)
	if after == nil {
		return errMalformed
	}
	m, ok := r.t.(target.Migrator)
	if !ok {
		return errCannotMigrate
	}
	if w := c.WaitFor(); len(w) > 0 {
		d, ok := r.t.(target.Drainer)
		if !ok {
			return fmt.Errorf("queues %v dead-letter into queue %q by name, and this target cannot wait for them to drain before migrating it", w, c.Address.Name)
		}
		if err := d.WaitDrained(ctx, c.Address.Vhost, c.Address.Name, w); err != nil {
			return err
		}
	}
	return m.MigrateQueue(ctx, *after)
}
