package status

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

// TestStatusShowsMigration: a migration stopped between the delete and the
// re-declare of its queue leaves the messages in the temporary queue,
// which status shows under the queue, flagged; the drift says the next
// apply resumes it.
func TestStatusShowsMigration(t *testing.T) {
	files := parseSpec(t, `version: 1
vhost: shop
queues:
  - name: orders
    dlq: false
`)
	stats := map[string][]broker.QueueInfo{"shop": {{Name: "orders.rmqtopo-migrate", Messages: 40, Ready: 40}}}
	live := spec.Expand(files...)
	live.Queues = []topology.Queue{{Vhost: "shop", Name: "orders.rmqtopo-migrate", Durable: true}}
	st := Build(files, stats, liveState(live))
	var got []string
	for _, q := range st.Queues[0].Queues {
		got = append(got, q.Name+" "+q.Role+" "+strings.Join(q.Flags, ","))
	}
	want := []string{"orders work missing,drift", "orders.rmqtopo-migrate migration migration-in-progress"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	var text bytes.Buffer
	if err := Text(&text, st, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"drift: queue orders: migrate: resumes the migration in progress through queue \"orders.rmqtopo-migrate\"",
		"1 migration in progress (rmqtopo apply finishes it)",
	} {
		if !strings.Contains(squeeze(text.String()), want) {
			t.Errorf("text output lacks %q:\n%s", want, text.String())
		}
	}
}
