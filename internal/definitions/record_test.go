package definitions

import (
	"encoding/json"
	"fmt"
	"strings"
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

// A record written by an earlier rmqtopo (format version 1, its entries as
// plain JSON lists) is read as before; a version this rmqtopo does not know
// is refused by name rather than misread.
func TestRecordFormatVersions(t *testing.T) {
	v1 := `{"format_version":1,"spec":"shop","vhost":"v","generation":3,` +
		`"exchanges":[["orders.dlx","3f9a","co"]],"queues":[["orders","c0ff","co"],["rmqtopo.wait.1m","51ab","c"]],` +
		`"policies":[],"bindings":[["orders.dlx -> orders.dlq","[queue key=\"\"]","o"]]}`
	want := topology.NewRecord("shop", "v")
	want.Generation = 3
	x := topology.Address{Kind: topology.KindExchange, Vhost: "v", Name: "orders.dlx"}
	q := topology.Address{Kind: topology.KindQueue, Vhost: "v", Name: "orders"}
	w := topology.Address{Kind: topology.KindQueue, Vhost: "v", Name: "rmqtopo.wait.1m"}
	b := topology.Address{Kind: topology.KindBinding, Vhost: "v", Name: "orders.dlx -> orders.dlq", Key: `[queue key=""]`}
	want.Claims[x], want.Claims[q], want.Claims[w] = "3f9a", "c0ff", "51ab"
	want.Owned[x], want.Owned[q], want.Owned[b] = true, true, true
	got, err := DecodeRecord(Exchange{Vhost: "v", Name: want.ExchangeName(), Arguments: map[string]any{RecordArgument: v1}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("version 1 record (-want +got):\n%s", diff)
	}
	v9 := `{"format_version":9,"spec":"shop","vhost":"v","generation":4}`
	_, err = DecodeRecord(Exchange{Vhost: "v", Name: "rmqtopo.owner.shop.4", Arguments: map[string]any{RecordArgument: v9}})
	if err == nil || !strings.Contains(err.Error(), "format_version 9; this rmqtopo reads 1 and 2") {
		t.Errorf("version 9 record: err = %v, want it refused by version", err)
	}
}

// Version 2 exists to keep a large record small: the broker stores it and
// sends it in every listing of the vhost's exchanges.
func TestRecordCompressed(t *testing.T) {
	r := topology.NewRecord("big", "v")
	for i := range 5000 {
		q := topology.Address{Kind: topology.KindQueue, Vhost: "v", Name: fmt.Sprintf("svc%05d.work", i)}
		b := topology.Address{Kind: topology.KindBinding, Vhost: "v", Name: "biz -> " + q.Name, Key: fmt.Sprintf(`[queue key="k.%d"]`, i)}
		r.Claims[q], r.Claims[b] = fmt.Sprintf("%012x", i*7919), ""
		r.Owned[q], r.Owned[b] = true, true
	}
	text, err := EncodeRecord(r)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := json.Marshal(recordJSON{FormatVersion: 1, recordEntries: recordEntriesOf(r)})
	if len(text)*4 > len(plain) {
		t.Errorf("version 2 is %d bytes, more than a quarter of version 1's %d", len(text), len(plain))
	}
	got, err := DecodeRecord(Exchange{Vhost: "v", Name: r.ExchangeName(), Arguments: map[string]any{RecordArgument: text}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}
