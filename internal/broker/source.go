package broker

import (
	"context"
	"sort"

	"github.com/rmqtopo/rmqtopo/topology"
)

// Count adds to st the message and consumer counts of the named queues, by
// vhost, from one filtered queue listing per vhost (see QueueCounts). With
// Read, it makes a Client a plan.Source.
func (c *Client) Count(ctx context.Context, st *topology.State, need map[string][]string) error {
	vhosts := make([]string, 0, len(need))
	for v := range need {
		vhosts = append(vhosts, v)
	}
	sort.Strings(vhosts)
	for _, v := range vhosts {
		names := need[v]
		filter := names
		// Past a few hundred names a filter costs more than listing all.
		if len(names) > 200 {
			filter = nil
		}
		counts, err := c.QueueCounts(ctx, v, filter)
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
