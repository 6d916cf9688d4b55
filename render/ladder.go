package render

import (
	"fmt"
	"strings"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/english"
	"github.com/rmqtopo/rmqtopo/topology"
)

// collapseLadders returns t with each delay ladder drawn as one exchange:
// its N level queues, N stages and O(N²) bindings would bury the rest of a
// diagram. What flows into the ladder (the retry exchanges' bindings to its
// entry) and out of it (one edge per destination queue, and to its DLQ)
// stays. t is not changed.
func collapseLadders(t topology.Topology) topology.Topology {
	type vl struct{ vhost, name string }
	ladders := map[vl]contract.Ladder{}
	node := func(vhost, name string) (string, bool) {
		l, ok := contract.ParseLadderObject(name)
		if !ok || name == l.DeadLetterQueue() {
			return name, false
		}
		ladders[vl{vhost, l.Name()}] = l
		return l.Name(), true
	}
	out := topology.Topology{Vhosts: t.Vhosts, Policies: t.Policies}
	for _, e := range t.Exchanges {
		if _, in := node(e.Vhost, e.Name); !in {
			out.Exchanges = append(out.Exchanges, e)
		}
	}
	for _, q := range t.Queues {
		if _, in := node(q.Vhost, q.Name); !in {
			out.Queues = append(out.Queues, q)
		}
	}
	seen := map[topology.Address]bool{}
	for _, b := range t.Bindings {
		src, fromLadder := node(b.Vhost, b.Source)
		dst, toLadder := b.Destination, false
		if b.DestinationType == topology.DestExchange || strings.HasPrefix(dst, contract.LevelsPrefix) {
			dst, toLadder = node(b.Vhost, b.Destination)
		}
		switch {
		case fromLadder && toLadder:
			continue // inside the ladder
		case fromLadder:
			b.Arguments, b.RoutingKey = nil, "after its delay"
			if strings.HasPrefix(dst, contract.LevelsPrefix) {
				b.RoutingKey = "unknown destination" // the ladder's DLQ
			}
		}
		b.Source, b.Destination = src, dst
		if toLadder {
			b.DestinationType = topology.DestExchange
		}
		if !seen[b.Addr()] {
			seen[b.Addr()] = true
			out.Bindings = append(out.Bindings, b)
		}
	}
	for k, l := range ladders {
		out.Exchanges = append(out.Exchanges, topology.Exchange{Vhost: k.vhost, Name: k.name,
			Type: fmt.Sprintf("delay ladder: %s of %s", english.Count(l.Levels, "level", "levels"), contract.FormatDelay(l.Resolution))})
	}
	out.Sort()
	return out
}
