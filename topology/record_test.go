package topology

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestOwnershipFor(t *testing.T) {
	q := func(n string) Address { return Address{Kind: KindQueue, Vhost: "v", Name: n} }
	a := NewRecord("a", "v")
	a.Claims[q("a.work")], a.Claims[q("shared")] = "1", "s"
	a.Owned[q("a.work")], a.Owned[q("a.old")] = true, true
	b := NewRecord("b", "v")
	b.Claims[q("b.work")] = "2"
	b.Owned[q("b.work")], b.Owned[q("shared")], b.Owned[q("b.gone")], b.Owned[q("a.old")] = true, true, true, true
	o := OwnershipFor([]Record{a, b}, map[string]string{"v": "b"})
	want := map[Address]bool{q("b.work"): true, q("b.gone"): true}
	if diff := cmp.Diff(want, o.Deletable); diff != "" {
		t.Errorf("b may delete (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a"}, o.Others[q("shared")]); diff != "" {
		t.Errorf("shared is claimed by (-want +got):\n%s", diff)
	}
	// a.old: owned by both records (an old mistake), claimed by neither:
	// a still owns it, so b must not delete it.
	if o.Deletable[q("a.old")] {
		t.Error("b may delete a.old, which a's record owns")
	}
}

func TestDigestIgnoresIntegerWidthAndClassic(t *testing.T) {
	x := Queue{Vhost: "v", Name: "q", Durable: true, Arguments: Args{"x-message-ttl": 5, "x-queue-type": "classic"}}
	y := Queue{Vhost: "v", Name: "q", Durable: true, Arguments: Args{"x-message-ttl": int64(5)}}
	if Digest(x) != Digest(y) {
		t.Error("digests differ for the same queue")
	}
	y.Arguments["x-queue-type"] = "quorum"
	if Digest(x) == Digest(y) {
		t.Error("digests agree for a classic and a quorum queue")
	}
}
