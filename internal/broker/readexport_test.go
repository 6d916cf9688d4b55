package broker_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	rabbithole "github.com/michaelklishin/rabbit-hole/v2"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/topology"
)

// TestReadFromExportAsFromListings holds the two ways a read takes a
// vhost's definitions (the export, from RabbitMQ 4.3, and the four
// listings before it or for a user who may not export) to one answer, on
// whatever release the suite runs: a vhost with what the export treats
// apart (an internal exchange and its bindings, an exclusive queue bound
// to an exchange, a transient queue, an auto-delete one, a policy, and
// rmqtopo's own ownership record).
func TestReadFromExportAsFromListings(t *testing.T) {
	t.Parallel()
	l := newLive(t)
	ctx := context.Background()
	want := topology.Topology{Vhosts: []string{l.vhost},
		Exchanges: []topology.Exchange{
			{Vhost: l.vhost, Name: "pub", Type: "fanout", Durable: true},
			{Vhost: l.vhost, Name: "ix", Type: "topic", Durable: true, Internal: true},
		},
		Queues: []topology.Queue{
			{Vhost: l.vhost, Name: "q", Durable: true},
			{Vhost: l.vhost, Name: "ad", Durable: true, AutoDelete: true},
		},
		Bindings: []topology.Binding{
			{Vhost: l.vhost, Source: "pub", Destination: "ix", DestinationType: topology.DestExchange, RoutingKey: "b"},
			{Vhost: l.vhost, Source: "ix", Destination: "q", DestinationType: topology.DestQueue, RoutingKey: "a"},
			{Vhost: l.vhost, Source: "pub", Destination: "ad", DestinationType: topology.DestQueue, RoutingKey: "c"},
		},
		Policies: []topology.Policy{{Vhost: l.vhost, Name: "ttl", Pattern: "^q$", ApplyTo: "queues", Definition: topology.Args{"message-ttl": int64(60000)}}},
	}
	l.converge(t, want, false)
	if _, err := l.b.Mgmt(t).DeclareQueue(l.vhost, "transient", rabbithole.QueueSettings{Durable: false}); err != nil {
		t.Fatal(err)
	}
	conn := l.b.Dial(t, l.vhost)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("mine", false, true, true, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind("mine", "", "pub", false, amqp.Table{}); err != nil {
		t.Fatal(err)
	}

	read := func(how func(*broker.Client)) *topology.State {
		t.Helper()
		c := connect(t, l.b, l.vhost).c
		how(c)
		st, err := c.Read(ctx, []string{l.vhost})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	listed, exported := read(broker.ReadFromListings), read(broker.ReadFromExport)
	if diff := cmp.Diff(listed, exported, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("read from the export (+) is not read from the listings (-):\n%s", diff)
	}
	if len(exported.Records) != 1 {
		t.Errorf("read from the export: %d ownership records, want the apply's 1", len(exported.Records))
	}
	names := map[string]bool{}
	for _, q := range exported.Topology.Queues {
		names[q.Name] = true
	}
	if !names["transient"] || names["mine"] {
		t.Errorf("read from the export: queues %v, want the transient one and not the exclusive one", names)
	}
}
