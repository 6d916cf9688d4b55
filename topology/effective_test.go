package topology

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEffective(t *testing.T) {
	q := Queue{Vhost: "/", Name: "orders", Arguments: Args{"x-queue-type": "quorum", "x-message-ttl": int64(5000),
		"x-dead-letter-exchange": "arg.dlx", "x-max-priority": int64(3)}}
	user := Policy{Vhost: "/", Name: "p", Pattern: "^orders$", ApplyTo: "queues", Priority: 1,
		Definition: Args{"message-ttl": int64(1000), "dead-letter-exchange": "policy.dlx", "max-length": int64(50), "delivery-limit": int64(20)}}
	low := Policy{Vhost: "/", Name: "low", Pattern: ".*", ApplyTo: "all", Definition: Args{"max-length": int64(1)}}
	op := Policy{Vhost: "/", Name: "op", Pattern: "^ord", ApplyTo: "queues", Definition: Args{"max-length": int64(10), "delivery-limit": int64(30)}}
	got := EffectiveUnder(q, []Policy{low, user}, []Policy{op})
	want := Args{
		"message-ttl":          int64(1000), // the lower of argument and policy
		"dead-letter-exchange": "arg.dlx",   // the argument beats the policy
		"max-length":           int64(10),   // the operator policy caps the policy
		"delivery-limit":       int64(20),   // the operator policy's is higher
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if ps := Matching(q, []Policy{low, user, {Vhost: "/", Name: "c", Pattern: ".*", ApplyTo: "classic_queues"}}); len(ps) != 2 || ps[0].Name != "p" {
		t.Errorf("Matching: %+v", ps)
	}
	if !(Policy{Vhost: "/", Pattern: "retry$", ApplyTo: "exchanges"}).AppliesExchange(Exchange{Vhost: "/", Name: "orders.retry"}) {
		t.Error("an exchange policy does not apply to its exchange")
	}
}
