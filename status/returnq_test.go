package status

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/spec"
)

// TestStatusShowsReturnQueue: a return queue is a row of its work queue;
// its ready messages are retries waiting to be picked up, counted in the
// summary, and flagged when nothing consumes it.
func TestStatusShowsReturnQueue(t *testing.T) {
	f, err := spec.Parse("r.yaml", []byte("version: 1\nqueues:\n  - {name: a, return_queue: true, retry: {delays: [1s]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	stats := map[string][]broker.QueueInfo{"/": {
		{Name: "a", Consumers: 1}, {Name: "a.dlq"}, {Name: "rmqtopo.wait.1s"},
		{Name: "a.return", Messages: 9, Ready: 7, Unacked: 2},
	}}
	st := Build([]*spec.File{f}, stats, nil)
	var row *QueueStatus
	for i, r := range st.Queues[0].Queues {
		if r.Name == "a.return" {
			row = &st.Queues[0].Queues[i]
		}
	}
	if row == nil || row.Role != RoleReturn || !slices.Contains(row.Flags, FlagReturnNotServed) {
		t.Fatalf("return queue row %+v; want role %s, flag %s", row, RoleReturn, FlagReturnNotServed)
	}
	if st.Summary.RetriesWaiting != 7 {
		t.Errorf("retries waiting %d; want the 7 ready", st.Summary.RetriesWaiting)
	}
	var out bytes.Buffer
	if err := Text(&out, st, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "7 retries waiting in return queues") {
		t.Errorf("text status:\n%s\nwant the retries waiting in the summary", out.String())
	}
}
