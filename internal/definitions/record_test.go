package definitions

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/topology"
)

func TestRecordRoundTrip(t *testing.T) {
	r := topology.NewRecord("shop", "v")
	r.Generation = 7
	q := topology.Address{Kind: topology.KindQueue, Vhost: "v", Name: "orders"}
	w := topology.Address{Kind: topology.KindQueue, Vhost: "v", Name: "rmqtopo.wait.1s"}
	b := topology.Address{Kind: topology.KindBinding, Vhost: "v", Name: "x -> orders", Key: `[queue key=""]`}
	gone := topology.Address{Kind: topology.KindExchange, Vhost: "v", Name: "old"}
	r.Claims[q], r.Claims[w], r.Claims[b] = "abc", "def", ""
	r.Owned[q], r.Owned[b], r.Owned[gone] = true, true, true
	text, err := EncodeRecord(r)
	if err != nil {
		t.Fatal(err)
	}
	older := r.Clone()
	older.Generation = 6
	oldText, _ := EncodeRecord(older)
	doc := Document{Exchanges: []Exchange{
		{Vhost: "v", Name: r.ExchangeName(), Type: "fanout", Arguments: map[string]any{RecordArgument: text}},
		{Vhost: "v", Name: older.ExchangeName(), Type: "fanout", Arguments: map[string]any{RecordArgument: oldText}},
		{Vhost: "v", Name: "orders.dlx", Type: "fanout"},
	}}
	got, err := doc.Records("v")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]topology.Record{r}, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if clean := Clean(doc.ToTopology("v")); len(clean.Exchanges) != 1 {
		t.Errorf("Clean kept %v, want only orders.dlx", clean.Exchanges)
	}
}

func TestDefaultQueueTypeOfAVhost(t *testing.T) {
	doc := Document{
		Vhosts: []Vhost{{Name: "q", Metadata: &VhostMetadata{DefaultQueueType: "quorum"}}, {Name: "c", TopDefaultQueueType: "undefined"}},
		Queues: []Queue{{Vhost: "q", Name: "a"}, {Vhost: "q", Name: "b", Arguments: map[string]any{"x-queue-type": "classic"}}, {Vhost: "c", Name: "a"}},
	}
	got := map[string]string{}
	for _, q := range doc.ToTopology().Queues {
		got[q.Vhost+"/"+q.Name] = q.QueueType()
	}
	if diff := cmp.Diff(map[string]string{"q/a": "quorum", "q/b": "classic", "c/a": "classic"}, got); diff != "" {
		t.Errorf("queue types (-want +got):\n%s", diff)
	}
}
