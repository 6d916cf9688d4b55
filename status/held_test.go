package status

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/spec"
)

func TestForwarded(t *testing.T) {
	for _, tc := range []struct {
		before, now int64
		want        bool
	}{
		{5, 5, false}, // none forwarded
		{5, 9, false}, // more held: none forwarded, or fewer than were added
		{5, 4, true},
		{5, 0, true},
	} {
		if got := Forwarded(tc.before, tc.now); got != tc.want {
			t.Errorf("Forwarded(%d, %d) = %v, want %v", tc.before, tc.now, got, tc.want)
		}
	}
}

func TestDeadLettersHeld(t *testing.T) {
	dlx := int64(7)
	for _, tc := range []struct {
		q    broker.QueueInfo
		want int64
	}{
		// The broker's own count wins: the statistics of messages and
		// messages_ready can be read at different instants.
		{broker.QueueInfo{Messages: 10, Ready: 2, DeadLettered: &dlx}, 7},
		{broker.QueueInfo{Messages: 10, Ready: 2, Unacked: 1}, 7},
		{broker.QueueInfo{Messages: 1, Ready: 2}, 0},
	} {
		if got := tc.q.DeadLettersHeld(); got != tc.want {
			t.Errorf("%+v: DeadLettersHeld = %d, want %d", tc.q, got, tc.want)
		}
	}
}

// heldSpec has two work queues sharing the 1s wait queue, and a 1m one.
const heldSpec = `version: 1
vhost: v
queues:
  - name: a
    type: quorum
    retry: {delays: [1s, 1m]}
  - name: b
    type: quorum
    retry: {delays: [1s]}
`

func heldStatus(t *testing.T) Report {
	t.Helper()
	f, err := spec.Parse("held.yaml", []byte(heldSpec))
	if err != nil {
		t.Fatal(err)
	}
	dlx := func(n int64) *int64 { return &n }
	stats := map[string][]broker.QueueInfo{"v": {
		{Name: "a", Consumers: 1}, {Name: "a.dlq"}, {Name: "b", Consumers: 1}, {Name: "b.dlq"},
		{Name: "rmqtopo.wait.1s", Messages: 12, Ready: 2, DeadLettered: dlx(10)},
		{Name: "rmqtopo.wait.1m", Messages: 3, DeadLettered: dlx(3)},
	}}
	return Build([]*spec.File{f}, stats, nil)
}

func TestHeldQueues(t *testing.T) {
	want := []HeldQueue{{"v", "rmqtopo.wait.1s", 10}, {"v", "rmqtopo.wait.1m", 3}}
	if diff := cmp.Diff(want, HeldQueues(heldStatus(t))); diff != "" {
		t.Errorf("held queues, the shared one once (-want +got):\n%s", diff)
	}
}

// fakeQueues answers each read of a queue with the next of its held
// counts (the last one again when they run out); a queue without counts
// no longer exists.
type fakeQueues struct {
	held  map[string][]int64
	reads map[string]int
	slept time.Duration
	err   error
}

func (f *fakeQueues) watch(margin time.Duration) HeldWatch {
	f.reads = map[string]int{}
	return HeldWatch{Margin: margin, Every: 5 * time.Second,
		Read: func(_ context.Context, _, name string) (broker.QueueInfo, bool, error) {
			counts := f.held[name]
			if f.err != nil || len(counts) == 0 {
				return broker.QueueInfo{}, false, f.err
			}
			n := counts[min(f.reads[name], len(counts)-1)]
			f.reads[name]++
			return broker.QueueInfo{DeadLettered: &n}, true, nil
		},
		Sleep: func(_ context.Context, d time.Duration) error { f.slept += d; return nil },
	}
}

func TestHeldWatch(t *testing.T) {
	held := []HeldQueue{{"v", "stuck", 10}, {"v", "growing", 3}, {"v", "draining", 5}, {"v", "gone", 2}}
	for _, tc := range []struct {
		name   string
		margin time.Duration
		counts map[string][]int64
		want   []HeldQueue
		slept  time.Duration
	}{
		{"stuck and growing queues forward none", 12 * time.Second,
			map[string][]int64{"stuck": {10, 10, 10}, "growing": {3, 4, 9}, "draining": {5, 5, 4}},
			[]HeldQueue{{"v", "stuck", 10}, {"v", "growing", 9}}, 12 * time.Second},
		// One reading below the first is enough: the count may rise again
		// with new dead-letters that flow.
		{"a dip is a forward", 20 * time.Second,
			map[string][]int64{"stuck": {10, 9, 12}, "growing": {3, 2}, "draining": {0}},
			nil, 10 * time.Second},
		{"no margin reads nothing", 0, map[string][]int64{"stuck": {10}}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeQueues{held: tc.counts}
			got, err := f.watch(tc.margin).Stuck(context.Background(), held)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("stuck (-want +got):\n%s", diff)
			}
			if f.slept != tc.slept {
				t.Errorf("watched for %s, want %s (stopping once every queue forwarded)", f.slept, tc.slept)
			}
		})
	}
	f := &fakeQueues{err: errors.New("boom")}
	if _, err := f.watch(time.Minute).Stuck(context.Background(), held); err == nil {
		t.Error("a failed read is no error")
	}
}

func TestMarkStuck(t *testing.T) {
	st := heldStatus(t)
	MarkStuck(&st, 30*time.Second, []HeldQueue{{"v", "rmqtopo.wait.1s", 11}})
	var flagged []string
	for _, wq := range st.Queues {
		for _, q := range wq.Queues {
			if q.Stuck > 0 {
				flagged = append(flagged, wq.Queue+" "+q.Name+" "+strings.Join(q.Flags, ","))
			}
		}
	}
	want := []string{
		"a rmqtopo.wait.1s dead-letters-held,dead-letters-stuck",
		"b rmqtopo.wait.1s dead-letters-held,dead-letters-stuck",
	}
	if diff := cmp.Diff(want, flagged); diff != "" {
		t.Errorf("stuck rows (-want +got):\n%s", diff)
	}
	if st.Summary.WaitQueuesStuck != 1 || st.Summary.DeadLettersStuck != 11 || st.HeldMargin != "30s" {
		t.Errorf("summary %+v, margin %q: want 1 queue, 11 stuck, 30s", st.Summary, st.HeldMargin)
	}
	var text, js bytes.Buffer
	if err := Text(&text, st, false); err != nil {
		t.Fatal(err)
	}
	if err := JSON(&js, st); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"13 dead-letters held in wait queues", "1 wait queue forwarded none of 11 held dead-letters in 30s (stuck)"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	for _, want := range []string{`"held_margin": "30s"`, `"dead_letters_stuck": 11`, `"wait_queues_stuck": 1`} {
		if !strings.Contains(js.String(), want) {
			t.Errorf("JSON lacks %s:\n%s", want, js.String())
		}
	}
}
