package spec

import (
	"fmt"

	"github.com/rmqtopo/rmqtopo/topology"
)

// checkRetired refuses a retired name that is not one a spec may take
// over (amq.*, a record), that the spec itself declares or generates (it
// would be the spec's and retired at once), or that two queues retire.
// It runs after every queue is declared and generated.
func (b *builder) checkRetired() {
	seen := map[string]string{}
	for _, q := range b.s.Queues {
		for i, name := range q.Retire {
			o := origin{at: q.nameAt, what: fmt.Sprintf("retired by queue %q", q.Name)}
			if i < len(q.retireAt) { // a spec built in code has no positions
				o.at = q.retireAt[i]
			}
			if !b.checkName("queue", name, false, o) {
				continue
			}
			if j, ok := b.queueAt[name]; ok {
				b.errorf(o.at, "queue %q is retired by queue %q, but the spec keeps it: it is the queue %s; a retired queue is one the spec no longer needs", name, q.Name, b.queueFrom[j])
				continue
			}
			if first, ok := seen[name]; ok {
				b.errorf(o.at, "queue %q is retired by queue %q and by queue %q; name it once", name, first, q.Name)
				continue
			}
			seen[name] = q.Name
		}
	}
}

// Retired returns the queues the files retire (retire:), by address: the
// hand-made queues their adoption replaces. The plan keeps each while it
// holds messages, deletes it with prune once empty, and apply records it
// as the spec's own (plan.Choices.Retire).
func Retired(files ...*File) map[topology.Address]bool {
	out := map[topology.Address]bool{}
	for _, f := range files {
		for _, q := range f.Spec.Queues {
			for _, name := range q.Retire {
				out[topology.Address{Kind: topology.KindQueue, Vhost: f.Spec.Vhost, Name: name}] = true
			}
		}
	}
	return out
}
