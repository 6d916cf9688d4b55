// Package shapetest turns a topology of today's spec.Expand into the
// shapes other tools and earlier rmqtopo versions gave the same retry
// layout, for tests and benchmarks of adoption and upgrade: where a work
// queue's attributes live changes, nothing else does.
package shapetest

import (
	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Legacy is t as rmqtopo made it before its work queues carried their
// dead-lettering as arguments: each work queue declared with its type
// only, every other attribute in its own policy, rmqtopo.queue.Q.
func Legacy(t topology.Topology) topology.Topology {
	out := t
	out.Queues = make([]topology.Queue, 0, len(t.Queues))
	out.Policies = append([]topology.Policy(nil), t.Policies...)
	byName := map[string]int{}
	for i, p := range out.Policies {
		byName[p.Vhost+"\x00"+p.Name] = i
	}
	for _, q := range t.Queues {
		if _, ok := q.Arguments["x-dead-letter-exchange"]; !ok || contract.IsWaitQueue(q.Name) {
			out.Queues = append(out.Queues, q)
			continue
		}
		def, kept := topology.Args{}, topology.Args{}
		for k, v := range q.Arguments {
			if pk, ok := topology.PolicyKey(k); ok {
				def[pk] = v
			} else {
				kept[k] = v
			}
		}
		name := contract.QueuePolicy(q.Name)
		if i, ok := byName[q.Vhost+"\x00"+name]; ok {
			for k, v := range out.Policies[i].Definition {
				def[k] = v
			}
			out.Policies[i].Definition = topology.NormalizeArgs(def)
		} else {
			out.Policies = append(out.Policies, topology.Policy{Vhost: q.Vhost, Name: name, Pattern: contract.ExactPattern(q.Name),
				ApplyTo: "queues", Priority: contract.ManagedPolicyPriority, Definition: topology.NormalizeArgs(def)})
		}
		q.Arguments = kept
		out.Queues = append(out.Queues, q)
	}
	out.Sort()
	return out
}

// Arguments is t with every rmqtopo queue policy's keys declared as the
// queue's arguments instead, and no such policy: the shape rmqtopo gave
// queues before it had policies, and that hand-written layouts have.
func Arguments(t topology.Topology) topology.Topology {
	out := t
	out.Queues = append([]topology.Queue(nil), t.Queues...)
	out.Policies = nil
	defs := map[string]topology.Args{}
	for _, p := range t.Policies {
		if kind, name, ok := contract.ManagedPolicyTarget(p.Name); ok && kind == "queue" && p.Name == contract.QueuePolicy(name) {
			defs[p.Vhost+"\x00"+name] = p.Definition
			continue
		}
		out.Policies = append(out.Policies, p)
	}
	for i, q := range out.Queues {
		def, ok := defs[q.Vhost+"\x00"+q.Name]
		if !ok {
			continue
		}
		args := topology.Args{}
		for k, v := range q.Arguments {
			args[k] = v
		}
		for k, v := range def {
			args["x-"+k] = v
		}
		out.Queues[i].Arguments = topology.NormalizeArgs(args)
	}
	return out
}
