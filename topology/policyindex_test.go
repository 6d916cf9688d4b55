package topology

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The index must give exactly what Matching gives, ties and order
// included, for literal and other patterns alike.
func TestPolicyIndex(t *testing.T) {
	ps := []Policy{
		{Vhost: "/", Name: "b", Pattern: "^orders$", ApplyTo: "queues", Priority: 1},
		{Vhost: "/", Name: "all", Pattern: ".*", ApplyTo: "all", Priority: 1},
		{Vhost: "/", Name: "b", Pattern: "^orders$", ApplyTo: "all", Priority: 1},
		{Vhost: "/", Name: "dot", Pattern: `^orders\.retry$`, ApplyTo: "exchanges"},
		{Vhost: "/", Name: "fold", Pattern: "(?i)^ORDERS$", ApplyTo: "queues"},
		{Vhost: "/", Name: "alt", Pattern: "^orders$|^x$", ApplyTo: "queues", Priority: 5},
		{Vhost: "/", Name: "q", Pattern: "^a$", ApplyTo: "queues"},
		{Vhost: "other", Name: "o", Pattern: "^orders$", ApplyTo: "queues"},
		{Vhost: "/", Name: "bad", Pattern: "^(orders$", ApplyTo: "queues"},
		{Vhost: "/", Name: "empty", Pattern: "^$", ApplyTo: "queues"},
	}
	for _, lit := range []string{"^orders$", `^orders\.retry$`, "^a$"} {
		if _, ok := exactLiteral(lit); !ok {
			t.Errorf("exactLiteral(%q) is not a literal", lit)
		}
	}
	for _, pat := range []string{"(?i)^ORDERS$", "^orders$|^x$", "^orders", "orders$", "^(orders$", "^o.s$", "^$"} {
		if s, ok := exactLiteral(pat); ok {
			t.Errorf("exactLiteral(%q) = %q, want no literal", pat, s)
		}
	}
	x := NewPolicyIndex(ps)
	for _, name := range []string{"orders", "ORDERS", "orders.retry", "a", "x", "", "nothing"} {
		for _, vhost := range []string{"/", "other"} {
			q := Queue{Vhost: vhost, Name: name}
			if diff := cmp.Diff(Matching(q, ps), x.Matching(q)); diff != "" {
				t.Errorf("queue %q in %q (-want +got):\n%s", name, vhost, diff)
			}
			e := Exchange{Vhost: vhost, Name: name}
			if diff := cmp.Diff(MatchingExchange(e, ps), x.MatchingExchange(e)); diff != "" {
				t.Errorf("exchange %q in %q (-want +got):\n%s", name, vhost, diff)
			}
		}
	}
}

// The shortcut for QuoteMeta'd literals must read every pattern it
// answers for as the regexp parser does.
func TestQuotedLiteralIsParsed(t *testing.T) {
	for _, pat := range []string{"^orders$", `^orders\.retry$`, `^a\$$`, `^a\$`, `^\.\+\*\?\(\)\|\[\]\{\}\^\$\\$`,
		`^a\d$`, `^a\Qb\E$`, "^é$", "^\uFFFD$", "^a b-c_d/e#f$", "^a\nb$", "^a.b$", "^^a$", "^a$$", "^$", "^\\$",
		"^a\x00$", "^\xff$", `^a\-b$`, "^(?i)a$"} {
		want, wantOK := parsedLiteral(pat)
		got, ok := quotedLiteral(pat[1 : len(pat)-1])
		if ok && (got != want || !wantOK) {
			t.Errorf("quotedLiteral(%q) = %q; the parser says %q, %t", pat, got, want, wantOK)
		}
		if g, o := exactLiteral(pat); g != want || o != wantOK {
			t.Errorf("exactLiteral(%q) = %q, %t; the parser says %q, %t", pat, g, o, want, wantOK)
		}
	}
}

// Args.String must render every value as json.Marshal does.
func TestArgsStringJSON(t *testing.T) {
	a := Args{"i": int64(-42), "b": true, "s": "plain-text_1.2", "h": "<a&b>", "q": `say "hi"\`, "u": "é\u2028", "c": "\t",
		"f": 1.5, "l": []any{"x", int64(1)}, "n": nil, "m": map[string]any{"k": "v"}}
	want := `{b: true, c: "\t", f: 1.5, h: "\u003ca\u0026b\u003e", i: -42, l: ["x",1], m: {"k":"v"}, n: null, q: "say \"hi\"\\", s: "plain-text_1.2", u: "é\u2028"}`
	if diff := cmp.Diff(want, a.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	b := Binding{DestinationType: "queue", RoutingKey: "k\"é\x01", Arguments: Args{"x-match": "all"}}
	if diff := cmp.Diff(`[queue key="k\"é\x01" args={x-match: "all"}]`, b.Addr().Key); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestAddressString(t *testing.T) {
	for _, c := range []struct {
		a    Address
		want string
	}{
		{Address{Kind: KindVhost, Name: "/"}, `vhost "/"`},
		{Address{Kind: KindQueue, Vhost: "v\"é", Name: "q\x01"}, `queue "q\x01" in vhost "v\"é"`},
		{Address{Kind: KindBinding, Vhost: "/", Name: "a -> b", Key: `[queue key=""]`}, `binding "a -> b" [queue key=""] in vhost "/"`},
	} {
		if diff := cmp.Diff(c.want, c.a.String()); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	}
}
