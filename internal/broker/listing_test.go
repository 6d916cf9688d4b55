package broker

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestListingSkipsEmptyEntries: RabbitMQ 3.10 answers `columns` listings
// with [] for an object deleted mid-listing; the rest still decode.
func TestListingSkipsEmptyEntries(t *testing.T) {
	type item struct {
		Name string `json:"name"`
	}
	var got listing[item]
	if err := json.Unmarshal([]byte(`[{"name":"a"},[],{"name":"b"}]`), &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(listing[item]{{"a"}, {"b"}}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if err := json.Unmarshal([]byte(`[{"name":1}]`), &got); err == nil {
		t.Error("a malformed entry decoded without error")
	}
}
