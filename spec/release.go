package spec

import (
	"github.com/rmqtopo/rmqtopo/rabbitmq"
	"github.com/rmqtopo/rmqtopo/topology"
)

// What rmqtopo declares by RabbitMQ release, decided here and nowhere
// else. Expansion is for one release (ExpandFor): the one a plan is
// judged by (the --rabbitmq-version flag, else the broker's or the
// export's version). The zero release, unknown, declares what every
// release reads the same way.
//
// A quorum queue without a delivery limit has none before 4.0 and 20
// from 4.0 on (the release's profile, rabbitmq.Profile.DefaultDeliveryLimit).
// rmqtopo's default is 20 on every release, so a release whose default
// differs (before 4.0, or an unknown one) gets x-delivery-limit: 20
// written on the queues that take the default, and 4.0+ gets nothing: a later delivery_limit, in the queue's
// policy, then raises or lowers the limit in place (an argument would cap
// it: the lower of the two wins). A queue declared with the argument on
// 3.x and kept through an upgrade is the same queue on 4.0+ (plan's
// withDefaults), so an upgrade plans no replace.

// ExpandFor returns the desired topology of the files for RabbitMQ
// release v; see Expand.
func ExpandFor(v topology.Version, files ...*File) topology.Topology {
	var t topology.Topology
	for _, f := range files {
		b := newBuilder(&f.Spec, nil)
		b.release = v
		b.build()
		b.into(&t)
	}
	t.Sort()
	return t
}

// writesDefaultLimit reports whether a quorum queue that takes rmqtopo's
// default delivery limit must be declared with it on release v.
func writesDefaultLimit(v topology.Version) bool {
	return rabbitmq.ProfileFor(v).DefaultDeliveryLimit() != DefaultDeliveryLimit
}

// defaultLimit adds rmqtopo's default delivery limit to the arguments of a
// quorum queue, where the release does not give it by default.
func (b *builder) defaultLimit(args map[string]any) {
	if writesDefaultLimit(b.release) {
		args["x-delivery-limit"] = DefaultDeliveryLimit
	}
}

// typeArgs returns the arguments of a queue of type typ that takes the
// default delivery limit: a wait, level or return queue.
func (b *builder) typeArgs(typ string) map[string]any {
	args := declaredType(typ)
	if typ == TypeQuorum {
		b.defaultLimit(args)
	}
	return args
}

// deadEndArgs are the arguments of a DLQ or parking lot of type typ: none
// for classic, rather than an empty table to throw away; a quorum one
// keeps DeadEndDeliveryLimit on every release.
func deadEndArgs(typ string) map[string]any {
	if typ != TypeQuorum {
		return nil
	}
	return map[string]any{"x-queue-type": TypeQuorum, "x-delivery-limit": DeadEndDeliveryLimit}
}

// DeclaresAlike reports whether releases v and w are given the same
// expansion of every spec.
func DeclaresAlike(v, w topology.Version) bool { return writesDefaultLimit(v) == writesDefaultLimit(w) }
