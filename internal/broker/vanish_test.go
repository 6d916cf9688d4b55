package broker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

// deletingReader is the broker as a plan sees it right after a killed
// apply: its first read still lists a queue whose delete the broker
// carries out before the count, as the killed process's last request
// lands.
type deletingReader struct {
	*broker.Client
	t     *testing.T
	l     *live
	queue string
	reads int
}

func (d *deletingReader) Read(ctx context.Context, vhosts []string) (*topology.State, error) {
	st, err := d.Client.Read(ctx, vhosts)
	if d.reads++; d.reads == 1 {
		if _, derr := d.l.b.Mgmt(d.t).DeleteQueue(d.l.vhost, d.queue); derr != nil {
			d.t.Fatal(derr)
		}
	}
	return st, err
}

// TestPlanReadsAgainWhenAQueueVanished: a queue is read as classic, and
// the spec wants it quorum, a replace, whose message count the plan needs;
// the queue is deleted between the read and the count (CI saw it after a
// kill in the middle of an apply). The count finds it gone, and the plan
// reads again and creates it, instead of refusing a replace of unknown
// count. A migration's temporary queue that was never there is no
// reason to read again.
func TestPlanReadsAgainWhenAQueueVanished(t *testing.T) {
	t.Parallel()
	l := newLive(t)
	if err := l.s.DeclareQueue(context.Background(), topology.Queue{Vhost: l.vhost, Name: "orders", Durable: true}); err != nil {
		t.Fatal(err)
	}
	src := &deletingReader{Client: l.c, t: t, l: l, queue: "orders"}
	quorum := topology.Queue{Vhost: l.vhost, Name: "orders", Durable: true, Arguments: topology.Args{"x-queue-type": "quorum"}}
	desired := topology.Topology{Vhosts: []string{l.vhost}, Queues: []topology.Queue{quorum}}
	p, st, err := plan.Make(context.Background(), src, desired, plan.Choices{Specs: l.specs()})
	if err != nil {
		t.Fatal(err)
	}
	if src.reads != 2 || len(st.Vanished) != 0 {
		t.Errorf("read %d times, vanished %v; want 2 reads, the second without orders", src.reads, st.Vanished)
	}
	var changes []string
	for _, c := range p.Changes {
		if c.Action != plan.NoOp {
			changes = append(changes, c.Action.String()+" "+c.Address.String())
		}
	}
	if len(changes) != 1 || !strings.HasPrefix(changes[0], plan.Create.String()+" ") {
		t.Errorf("changes %q, want the create of orders", changes)
	}

	st = topology.NewState([]string{l.vhost})
	st.Topology = topology.Topology{Queues: []topology.Queue{quorum}}
	if err := l.c.Count(context.Background(), st, map[string][]string{l.vhost: {"orders", "orders.rmqtopo-migrate"}}); err != nil {
		t.Fatal(err)
	}
	want := topology.Address{Kind: topology.KindQueue, Vhost: l.vhost, Name: "orders"}
	if len(st.Vanished) != 1 || !st.Vanished[want] {
		t.Errorf("vanished %v, want orders alone (the state lists it; the migration queue it does not)", st.Vanished)
	}
}
