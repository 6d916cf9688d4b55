package broker

import (
	"context"
	"fmt"
	"sort"

	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

// PlanOptions are the user's choices for a plan against a live broker.
type PlanOptions struct {
	Prune bool
}

// Plan reads the vhosts of desired and plans the changes that take them to
// desired. Message and consumer counts are read only for the queues whose
// fate depends on them: a first, count-free diff (Diff is pure and cheap)
// names the queues it would replace or delete and the retired wait queues;
// their counts come from one filtered listing per vhost, and the final diff
// uses them. A plan with nothing destructive therefore costs one definitions
// GET and one ownership GET per vhost.
func Plan(ctx context.Context, c *Client, desired topology.Topology, opts PlanOptions) (plan.Plan, *State, error) {
	vhosts := Vhosts(desired)
	st, err := c.Read(ctx, vhosts)
	if err != nil {
		return plan.Plan{}, nil, err
	}
	p := st.Diff(desired, opts)
	if len(CountsNeeded(p)) == 0 {
		return p, st, nil
	}
	if err := st.readCounts(ctx, c, CountsNeeded(p)); err != nil {
		return plan.Plan{}, nil, err
	}
	return st.Diff(desired, opts), st, nil
}

// Vhosts lists the vhosts a topology describes, sorted.
func Vhosts(t topology.Topology) []string {
	vs := append([]string(nil), t.Vhosts...)
	for _, e := range t.Exchanges {
		vs = append(vs, e.Vhost)
	}
	for _, q := range t.Queues {
		vs = append(vs, q.Vhost)
	}
	for _, b := range t.Bindings {
		vs = append(vs, b.Vhost)
	}
	for _, p := range t.Policies {
		vs = append(vs, p.Vhost)
	}
	return uniqueSorted(vs)
}

// Diff plans against the state with the counts read so far.
func (st *State) Diff(desired topology.Topology, opts PlanOptions) plan.Plan {
	return plan.Diff(st.Topology, desired, plan.Options{
		Prune:       opts.Prune,
		Owned:       st.Owned,
		Messages:    st.Messages,
		Consumers:   st.Consumers,
		IsWaitQueue: IsWaitQueueName,
	})
}

// CountsNeeded returns, by vhost, the queues of p whose message count
// matters: those it replaces or deletes and the retired wait queues it
// keeps.
func CountsNeeded(p plan.Plan) map[string][]string {
	out := map[string][]string{}
	for _, c := range p.Changes {
		if c.Address.Kind != topology.KindQueue {
			continue
		}
		if c.Action == plan.DeleteThenCreate || c.Action == plan.Delete || c.Draining {
			out[c.Address.Vhost] = append(out[c.Address.Vhost], c.Address.Name)
		}
	}
	return out
}

// readCounts reads into st.Messages and st.Consumers the counts of the
// named queues, by vhost.
func (st *State) readCounts(ctx context.Context, c *Client, need map[string][]string) error {
	vhosts := make([]string, 0, len(need))
	for v := range need {
		vhosts = append(vhosts, v)
	}
	sort.Strings(vhosts)
	for _, v := range vhosts {
		names := need[v]
		var counts map[string]QueueCount
		var err error
		// Past a few hundred names a filter costs more than listing all.
		if len(names) > 200 {
			counts, err = c.QueueCounts(ctx, v, nil)
		} else {
			counts, err = c.QueueCounts(ctx, v, names)
		}
		if err != nil {
			return err
		}
		if st.Messages == nil {
			st.Messages = map[topology.Address]int64{}
		}
		if st.Consumers == nil {
			st.Consumers = map[topology.Address]int64{}
		}
		for _, n := range names {
			if q, ok := counts[n]; ok {
				a := topology.Address{Kind: topology.KindQueue, Vhost: v, Name: n}
				st.Messages[a] = q.Messages
				if q.Consumers != nil {
					st.Consumers[a] = *q.Consumers
				}
			}
		}
	}
	return nil
}

// RefreshCounts replaces the message and consumer counts of p's queue
// replaces, deletes and draining wait queues with fresh ones from the
// broker, so that a plan saved earlier is checked against the messages and
// consumers at stake now.
func RefreshCounts(ctx context.Context, c *Client, p *plan.Plan) error {
	for v, names := range CountsNeeded(*p) {
		counts, err := c.QueueCounts(ctx, v, names)
		if err != nil {
			return err
		}
		for i := range p.Changes {
			ch := &p.Changes[i]
			if ch.Address.Kind != topology.KindQueue || ch.Address.Vhost != v {
				continue
			}
			if ch.Action == plan.DeleteThenCreate || ch.Action == plan.Delete || ch.Draining {
				ch.Messages, ch.Consumers = nil, nil
				if q, ok := counts[ch.Address.Name]; ok {
					ch.Messages = &q.Messages
					if q.Consumers != nil && !ch.Draining {
						n := *q.Consumers
						ch.Consumers = &n
					}
				}
			}
		}
	}
	return nil
}

// String summarises a state for logs.
func (st *State) String() string {
	t := st.Topology
	return fmt.Sprintf("%d vhosts, %d exchanges, %d queues, %d bindings, %d policies, %d owned",
		len(t.Vhosts), len(t.Exchanges), len(t.Queues), len(t.Bindings), len(t.Policies), len(st.Owned))
}
