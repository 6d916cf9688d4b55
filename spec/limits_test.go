package spec

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// Names longer than RabbitMQ accepts are refused by validation, and no
// error quotes more than about 100 bytes of one, cut on a UTF-8 boundary.
func TestNameLimits(t *testing.T) {
	long := strings.Repeat("é", 200) // 400 bytes
	for _, tc := range []struct{ name, body, want string }{
		{"vhost", "vhost: " + long + "\nqueues:\n  - name: q\n", "vhost name"},
		{"queue", "queues:\n  - name: " + long + "\n", "queue name"},
		{"exchange", "exchanges:\n  - {name: " + long + ", type: topic}\n", "exchange name"},
		{"routing key", "exchanges:\n  - {name: x, type: topic}\nqueues:\n  - name: q\n    bindings: [{exchange: x, routing_key: " + long + "}]\n", "routing key"},
		{"spec name", "name: " + long + "\nqueues:\n  - name: q\n", "name \""},
		{"record prefix", "queues:\n  - name: q\nexchanges:\n  - {name: rmqtopo.owner.x.1, type: fanout}\n", "reserves for its ownership records"},
	} {
		_, err := Parse("s.yaml", []byte("version: 1\n"+tc.body))
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %q lacks %q", tc.name, msg, tc.want)
		}
		if strings.Contains(msg, long[:200]) || !utf8.ValidString(msg) {
			t.Errorf("%s: the error quotes too much of the name, or cuts a character: %q", tc.name, msg)
		}
	}
}

func TestDefaultName(t *testing.T) {
	for path, want := range map[string]string{
		"deploy/shop.yaml": "shop", "a b.yml": "a-b", ".hidden.yaml": "xhidden", "dir/orders.v2.yaml": "orders.v2",
	} {
		if got := DefaultName(path); got != want {
			t.Errorf("DefaultName(%q) = %q, want %q", path, got, want)
		}
	}
	f, err := Parse("deploy/shop.yaml", []byte("version: 1\nqueues:\n  - name: q\n"))
	if err != nil || f.Spec.Name != "shop" {
		t.Errorf("a spec without name is %q (%v), want shop", f.Spec.Name, err)
	}
}

// LoadExpanded gives what Expand gives.
func TestLoadExpandedIsExpand(t *testing.T) {
	for _, path := range []string{"../examples/shop.yaml", "../examples/spring.yaml", "../examples/outbox.yaml"} {
		files, got, err := LoadExpanded(DefaultMaxFileSize, path)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(Expand(files...), got); diff != "" {
			t.Errorf("%s: LoadExpanded vs Expand (-want +got):\n%s", path, diff)
		}
	}
}
