package upgrade

import (
	"fmt"
	"strings"

	"github.com/rmqtopo/rmqtopo/topology"
)

// Route is how to reach the target: in place along RabbitMQ's hops, or
// blue-green (a new cluster, definitions applied, messages moved).
type Route struct {
	// Kind is "in-place" or "blue-green".
	Kind string `json:"kind"`
	// Hops are the in-place steps, series to series ("3.13→4.0"); none
	// for blue-green.
	Hops []string `json:"hops,omitempty"`
	// Why says why blue-green is the only route, or what in place needs.
	Why  []string `json:"why"`
	Cite string   `json:"cite"`
}

func series(v topology.Version) string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// PlanRoute names the route from s's release to target.
func PlanRoute(s Snapshot, target topology.Version) Route {
	r := Route{Cite: CiteRoute}
	src := s.Version
	if !target.Less(rel(4, 0)) && src.Less(rel(3, 13)) {
		r.Why = append(r.Why, fmt.Sprintf("RabbitMQ %s is 3.12 or older: no in-place route reaches 4.x", src))
	}
	if s.Khepri && series(src) == "3.13" && !target.Less(rel(4, 0)) {
		r.Why = append(r.Why, "3.13 with Khepri (khepri_db enabled) cannot upgrade in place to 4.x")
	}
	if q := mirrored(s); len(q) > 0 && !target.Less(rel(4, 0)) {
		r.Why = append(r.Why, fmt.Sprintf("mirrored classic queues in use (%s): mirroring is gone in 4.0", short(q)))
	}
	if !src.Less(target) && series(src) == series(target) {
		r.Kind, r.Why = "in-place", append(r.Why, "same series: a patch upgrade")
		return r
	}
	hops := path(series(src), series(target))
	if len(r.Why) > 0 || hops == nil {
		if hops == nil && len(r.Why) == 0 {
			r.Why = append(r.Why, fmt.Sprintf("no in-place route from %s to %s", series(src), series(target)))
		}
		r.Kind = "blue-green"
		return r
	}
	r.Kind, r.Hops = "in-place", hops
	r.Why = append(r.Why, fmt.Sprintf("%d rolling upgrade(s), each with every feature flag enabled first; blue-green is also possible, and the upgrade guide calls it the safest", len(hops)))
	return r
}

// path is the shortest chain of hops from one series to another, nil if
// none.
func path(from, to string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == to {
			var out []string
			for s := to; s != from; s = prev[s] {
				out = append([]string{prev[s] + "→" + s}, out...)
			}
			return out
		}
		for _, next := range Hops[cur] {
			if _, seen := prev[next]; !seen {
				prev[next] = cur
				queue = append(queue, next)
			}
		}
	}
	return nil
}

// mirrored are the queues an ha-* key applies to.
func mirrored(s Snapshot) []string {
	var out []string
	for _, q := range s.Queues {
		for k := range q.Effective {
			if strings.HasPrefix(k, "ha-") {
				out = append(out, q.Name)
				break
			}
		}
	}
	return out
}
