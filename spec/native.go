package spec

import (
	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/topology"
)

// NativeDelayedRetry rewrites the expansion t of files for RabbitMQ 4.3's
// native delayed retry: every quorum queue without a preset whose
// schedule is linear, with no immediate retries, gets the queue arguments
// x-delayed-retry-type (failed), x-delayed-retry-min (the step) and
// x-delayed-retry-max (the last delay), and x-delivery-limit of attempts,
// instead of a retry exchange and wait queues: the broker then delays each
// rejected delivery by step × delivery count, and dead-letters it to the
// DLQ once it has been returned more than attempts times. Services reject (basic.reject, requeue)
// instead of republishing to Q.retry. It returns the rewritten topology
// and the queues it converted; other queues keep their wait queues.
//
// RabbitMQ 4.3 is not available to rmqtopo's tests: this is checked by
// unit tests only.
func NativeDelayedRetry(files []*File, t topology.Topology) (topology.Topology, []string) {
	drop := map[topology.Address]bool{}
	conv := map[topology.Address]topology.Args{}
	var converted []string
	for _, f := range files {
		for _, q := range f.Spec.Queues {
			if !nativeEligible(q) {
				continue
			}
			a := topology.Address{Kind: topology.KindQueue, Vhost: f.Spec.Vhost, Name: q.Name}
			step, last := q.Retry.Step.Milliseconds(), q.Retry.Delays()[q.Retry.Attempts-1].Milliseconds()
			conv[a] = topology.Args{"x-delayed-retry-type": "failed", "x-delayed-retry-min": step,
				"x-delayed-retry-max": last, "x-delivery-limit": int64(q.Retry.Attempts)}
			drop[topology.Address{Kind: topology.KindExchange, Vhost: f.Spec.Vhost, Name: contract.RetryExchange(q.Name)}] = true
			converted = append(converted, q.Name)
		}
	}
	return rewriteNative(t, drop, conv), converted
}

func nativeEligible(q Queue) bool {
	return !q.Raw && q.Preset == PresetNone && q.Type == TypeQuorum && q.Retry.Kind == "linear" &&
		q.Retry.Attempts > 0 && q.ImmediateRetries == 0
}

// rewriteNative drops the retry exchanges of converted queues and their
// bindings, then the wait queues no remaining binding feeds, and sets the
// converted queues' arguments.
func rewriteNative(t topology.Topology, drop map[topology.Address]bool, conv map[topology.Address]topology.Args) topology.Topology {
	out := topology.Topology{Vhosts: t.Vhosts, Policies: t.Policies}
	fed := map[topology.Address]bool{}
	for _, b := range t.Bindings {
		if drop[topology.Address{Kind: topology.KindExchange, Vhost: b.Vhost, Name: b.Source}] {
			continue
		}
		out.Bindings = append(out.Bindings, b)
		fed[topology.Address{Kind: topology.KindQueue, Vhost: b.Vhost, Name: b.Destination}] = true
	}
	for _, e := range t.Exchanges {
		if !drop[e.Addr()] {
			out.Exchanges = append(out.Exchanges, e)
		}
	}
	for _, q := range t.Queues {
		if contract.IsWaitQueue(q.Name) && !fed[q.Addr()] {
			continue
		}
		if extra, ok := conv[q.Addr()]; ok {
			args := topology.Args{}
			for k, v := range q.Arguments {
				args[k] = v
			}
			for k, v := range extra {
				args[k] = v
			}
			q.Arguments = args
		}
		out.Queues = append(out.Queues, q)
	}
	out.Sort()
	return out
}
