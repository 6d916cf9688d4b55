package status

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/internal/exitcode"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

// fakeBroker serves status.Read from memory: the listing of vhost v, and
// for GetQueue the held counts of each queue in turn (the last one again
// once they run out).
type fakeBroker struct {
	queues []broker.QueueInfo
	held   map[string][]int64
	gets   int
	reads  int
	// version is the broker's; "" is 3.10.8.
	version string
}

func (b *fakeBroker) Server(context.Context) (string, error) {
	if b.version != "" {
		return b.version, nil
	}
	return "3.10.8", nil
}

func (b *fakeBroker) ListQueues(_ context.Context, vhost string) ([]broker.QueueInfo, error) {
	if vhost != "v" {
		return nil, broker.ErrVhostNotFound
	}
	return b.queues, nil
}

func (b *fakeBroker) GetQueue(_ context.Context, vhost, name string) (broker.QueueInfo, error) {
	b.gets++
	counts, ok := b.held[name]
	if !ok {
		return broker.QueueInfo{}, broker.ErrNotFound
	}
	n := counts[0]
	if len(counts) > 1 {
		b.held[name] = counts[1:]
	}
	return broker.QueueInfo{Name: name, Messages: n}, nil
}

func (b *fakeBroker) Read(_ context.Context, vhosts []string) (*topology.State, error) {
	b.reads++
	return topology.NewState(vhosts), nil
}

func (b *fakeBroker) Count(context.Context, *topology.State, map[string][]string) error { return nil }

// noSleep records the waits of a watch and takes no time.
type noSleep struct{ waits []time.Duration }

func (s *noSleep) sleep(ctx context.Context, d time.Duration) error {
	s.waits = append(s.waits, d)
	return ctx.Err()
}

func heldFiles(t *testing.T) []*spec.File {
	f, err := spec.Parse("held.yaml", []byte(heldSpec))
	if err != nil {
		t.Fatal(err)
	}
	return []*spec.File{f}
}

// Read watches the wait queues that hold dead-letters for the margin,
// every statistics interval, and flags those whose count never fell; a
// queue that forwarded some is not stuck. No real time passes.
func TestReadWatchesHeldQueues(t *testing.T) {
	b := &fakeBroker{
		queues: []broker.QueueInfo{{Name: "a"}, {Name: "a.dlq"}, {Name: "b"}, {Name: "b.dlq"}, {Name: "rmqtopo.wait.1s", Messages: 4}, {Name: "rmqtopo.wait.1m", Messages: 2}},
		held:   map[string][]int64{"rmqtopo.wait.1s": {4, 4, 5}, "rmqtopo.wait.1m": {2, 1}},
	}
	var sleep noSleep
	var log strings.Builder
	st, err := Read(context.Background(), b, heldFiles(t), Options{HeldMargin: 12 * time.Second, Sleep: sleep.sleep, Log: &log,
		Flags: Flags{HeldMargin: "--held-margin"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []time.Duration{5 * time.Second, 5 * time.Second, 2 * time.Second}; !slices.Equal(sleep.waits, want) {
		t.Errorf("waits %v, want %v", sleep.waits, want)
	}
	if st.Summary.WaitQueuesStuck != 1 || st.Summary.DeadLettersStuck != 5 || st.HeldMargin != "12s" {
		t.Errorf("summary %+v, margin %q: want the 1s wait queue stuck with 5", st.Summary, st.HeldMargin)
	}
	if st.ExitCode() != exitcode.DeadLettersStuck {
		t.Errorf("exit code %d, want %d", st.ExitCode(), exitcode.DeadLettersStuck)
	}
	if want := "status: 2 wait queues hold 6 dead-letters; re-reading for up to 12s (--held-margin)\n"; log.String() != want {
		t.Errorf("log %q, want %q", log.String(), want)
	}
	if b.reads != 0 {
		t.Errorf("read the topology %d times without Drift", b.reads)
	}
}

// With the broker's own statistics interval, Read re-reads at that pace.
func TestReadWatchesAtTheStatsInterval(t *testing.T) {
	b := &fakeBroker{
		queues: []broker.QueueInfo{{Name: "a"}, {Name: "a.dlq"}, {Name: "b"}, {Name: "b.dlq"}, {Name: "rmqtopo.wait.1s", Messages: 4}, {Name: "rmqtopo.wait.1m"}},
		held:   map[string][]int64{"rmqtopo.wait.1s": {4, 4, 4}},
	}
	var sleep noSleep
	st, err := Read(context.Background(), b, heldFiles(t), Options{HeldMargin: 2500 * time.Millisecond, StatsInterval: time.Second, Sleep: sleep.sleep})
	if err != nil {
		t.Fatal(err)
	}
	if want := []time.Duration{time.Second, time.Second, 500 * time.Millisecond}; !slices.Equal(sleep.waits, want) {
		t.Errorf("waits %v, want %v", sleep.waits, want)
	}
	if st.ExitCode() != exitcode.DeadLettersStuck {
		t.Errorf("exit code %d, want %d", st.ExitCode(), exitcode.DeadLettersStuck)
	}
}

// When a finding that outranks stuck dead-letters decides the exit code
// (here missing queues: the vhost has none), Read does not wait.
func TestReadSkipsTheWatchWhenOutranked(t *testing.T) {
	b := &fakeBroker{queues: []broker.QueueInfo{{Name: "rmqtopo.wait.1s", Messages: 1}}, held: map[string][]int64{}}
	var sleep noSleep
	var log strings.Builder
	st, err := Read(context.Background(), b, heldFiles(t), Options{HeldMargin: time.Minute, Sleep: sleep.sleep, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	if len(sleep.waits) != 0 || b.gets != 0 || st.ExitCode() != exitcode.Missing {
		t.Errorf("waited %v, %d re-reads, exit %d; want no wait and exit %d", sleep.waits, b.gets, st.ExitCode(), exitcode.Missing)
	}
	if want := "the exit code is 5 either way"; !strings.Contains(log.String(), want) {
		t.Errorf("log %q lacks %q", log.String(), want)
	}
}

// An interrupted watch is an error that says what it was doing.
func TestReadWatchInterrupted(t *testing.T) {
	b := &fakeBroker{
		queues: []broker.QueueInfo{{Name: "a"}, {Name: "a.dlq"}, {Name: "b"}, {Name: "b.dlq"}, {Name: "rmqtopo.wait.1s", Messages: 4}, {Name: "rmqtopo.wait.1m"}},
		held:   map[string][]int64{"rmqtopo.wait.1s": {4}},
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var sleep noSleep
	_, err := Read(ctx, b, heldFiles(t), Options{HeldMargin: time.Minute, Sleep: sleep.sleep})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "re-reading wait queues that hold dead-letters") {
		t.Errorf("err %v", err)
	}
}

// The exit code ranks the findings: a DLQ with messages, then missing
// objects, then stuck dead-letters, then drift; and re-reading held wait
// queues matters only below the first two.
func TestExitCodeOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		st      Report
		code    int
		matters bool
	}{
		{"healthy, held but not stuck", Report{Summary: Summary{DeadLettersHeld: 5}}, 0, true},
		{"stuck", Report{Summary: Summary{WaitQueuesStuck: 1}}, exitcode.DeadLettersStuck, false},
		{"DLQ", Report{Summary: Summary{DLQsNotEmpty: 1}}, exitcode.DLQNotEmpty, false},
		{"stuck and drift", Report{Summary: Summary{WaitQueuesStuck: 1, DriftedObjects: 1}}, exitcode.DeadLettersStuck, false},
		{"drift", Report{Summary: Summary{DriftedObjects: 1}}, exitcode.Drift, true},
		{"stuck and missing", Report{Summary: Summary{WaitQueuesStuck: 1, MissingQueues: 1}}, exitcode.Missing, false},
		{"missing exchange", Report{Drift: []DriftItem{{Action: plan.Create}}}, exitcode.Missing, false},
		{"stuck and DLQ", Report{Summary: Summary{WaitQueuesStuck: 1, DLQsNotEmpty: 1}}, exitcode.DLQNotEmpty, false},
	} {
		code, matters := tc.st.HeldWaitMatters(2)
		if got := tc.st.ExitCode(); got != tc.code || code != tc.code || matters != tc.matters {
			t.Errorf("%s: exit %d (%d), matters %t; want %d, %t", tc.name, got, code, matters, tc.code, tc.matters)
		}
	}
}

// TestReadLaysOutAsPlanDoes: status resolves layout auto as plan does, so
// a live native queue on 4.3 misses no wait queue, and a live shared
// queue without a return queue misses none on 3.10; a queue not live yet
// is missing with the return queue a plan would create.
func TestReadLaysOutAsPlanDoes(t *testing.T) {
	f, err := spec.Parse("n.yaml", []byte(`version: 1
vhost: v
queues:
  - {name: n, type: quorum, retry: {delays: [1s, 2s]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	native := map[string]any{"x-queue-type": "quorum", "x-delayed-retry-type": "failed", "x-delayed-retry-min": int64(1000),
		"x-delayed-retry-max": int64(2000), "x-delivery-limit": int64(2)}
	for _, c := range []struct {
		version string
		queues  []broker.QueueInfo
		missing int
	}{
		{"4.3.6", []broker.QueueInfo{{Name: "n", Arguments: native}, {Name: "n.dlq"}}, 0},
		{"3.10.8", []broker.QueueInfo{{Name: "n"}, {Name: "n.dlq"}, {Name: "rmqtopo.wait.1s"}, {Name: "rmqtopo.wait.2s"}}, 0},
		{"3.10.8", nil, 5}, // n, n.dlq, n.return and two wait queues
		{"4.3.6", nil, 2},  // n, n.dlq
	} {
		b := &fakeBroker{version: c.version, queues: c.queues}
		r, err := Read(context.Background(), b, []*spec.File{f}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Summary.MissingQueues != c.missing {
			t.Errorf("%s with %d queues live: %d missing, want %d", c.version, len(c.queues), r.Summary.MissingQueues, c.missing)
		}
	}
}
