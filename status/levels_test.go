package status

import (
	"reflect"
	"strings"
	"testing"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/spec"
)

func TestStatusShowsLevels(t *testing.T) {
	f, err := spec.Parse("l.yaml", []byte("version: 1\nlayout: levels\nlevels: {max: 700ms}\nqueues:\n"+
		"  - name: a\n    retry: {fixed: {delay: 300ms, attempts: 2, jitter: full}}\n  - name: b\n    retry: {delays: [1s]}\n    layout: shared\n"))
	if err != nil {
		t.Fatal(err)
	}
	stats := map[string][]broker.QueueInfo{"/": {
		{Name: "a", Consumers: 1}, {Name: "a.dlq"},
		{Name: "rmqtopo.levels.100ms.3.q2.400ms", Messages: 5},
		{Name: "rmqtopo.levels.100ms.3.q1.200ms", Messages: 2},
		{Name: "rmqtopo.levels.100ms.3.q0.100ms"},
	}}
	st := Build([]*spec.File{f}, stats, nil)
	var names []string
	for _, r := range st.Queues[0].Queues {
		names = append(names, r.Name+"="+r.Delay)
	}
	want := "a= rmqtopo.levels.100ms.3.q2.400ms=400ms rmqtopo.levels.100ms.3.q1.200ms=200ms rmqtopo.levels.100ms.3.q0.100ms=100ms a.dlq="
	if got := strings.Join(names, " "); got != want {
		t.Errorf("rows of a:\n got %s\nwant %s", got, want)
	}
	// A level row says which level it is and how soon what waits there
	// is due, and claims no retry numbers: any retry may wait in any level.
	type level struct {
		Level     int
		DueWithin string
		Retries   int
	}
	var levels []level
	for _, r := range st.Queues[0].Queues[1:4] {
		if r.Level == nil {
			t.Fatalf("row %s has no level", r.Name)
		}
		levels = append(levels, level{*r.Level, r.DueWithin, len(r.Retries)})
	}
	if want := []level{{2, "700ms", 0}, {1, "300ms", 0}, {0, "100ms", 0}}; !reflect.DeepEqual(levels, want) {
		t.Errorf("levels %+v, want %+v", levels, want)
	}
	if st.Summary.MessagesInRetries != 7 || st.Summary.MissingQueues != 3 { // b, b.dlq, rmqtopo.wait.1s
		t.Errorf("summary %+v", st.Summary)
	}
}
