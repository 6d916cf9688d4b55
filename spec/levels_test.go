package spec

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/topology"
)

const levelsSpec = `version: 1
layout: levels
levels: {resolution: 100ms, max: 3s}
queues:
  - name: orders
    type: quorum
    immediate_retries: 1
    retry: {exponential: {initial: 200ms, factor: 2, max: 3s, attempts: 3, jitter: full}}
  - name: audit
    layout: shared
    retry: {delays: [1s]}
`

func TestExpandLevels(t *testing.T) {
	f, err := Parse("levels.yaml", []byte(levelsSpec))
	if err != nil {
		t.Fatal(err)
	}
	l, ok := f.Spec.Ladder()
	if want := (contract.Ladder{Resolution: 100 * time.Millisecond, Levels: 5}); !ok || l != want {
		t.Fatalf("Ladder() = %v, %v; want %v", l, ok, want)
	}
	top := Expand(f)
	queues := map[string]topology.Queue{}
	for _, q := range top.Queues {
		queues[q.Name] = q
	}
	for k := range l.Levels {
		q, ok := queues[l.LevelQueue(k)]
		want := quorumArgs(20, merge(atLeastOnce, topology.Args{"x-message-ttl": l.TTL(k).Milliseconds(),
			"x-dead-letter-exchange": l.Next(k)}))
		if !ok {
			t.Fatalf("no level queue %q", l.LevelQueue(k))
		}
		if diff := cmp.Diff(want, q.Arguments); diff != "" {
			t.Errorf("level %d arguments (-want +got):\n%s", k, diff)
		}
	}
	var got []string
	stageBindings := 0
	for _, b := range top.Bindings {
		switch {
		case strings.HasPrefix(b.Source, "rmqtopo.levels.100ms.5.x") && b.Source != l.EntryExchange():
			stageBindings++
		case strings.HasPrefix(b.Source, contract.LevelsPrefix) || b.Source == "orders.retry":
			got = append(got, b.Source+" -> "+b.Destination+" "+b.RoutingKey+" "+attemptOf(b))
		}
	}
	want := []string{
		"orders.retry -> orders  2", // retry 1 is attempt 2
		"orders.retry -> rmqtopo.levels.100ms.5.x5  3",
		"orders.retry -> rmqtopo.levels.100ms.5.x5  4",
		"orders.retry -> rmqtopo.levels.100ms.5.x5  5",
		"rmqtopo.levels.100ms.5.deliver -> audit *.*.*.*.*.audit ",
		"rmqtopo.levels.100ms.5.deliver -> orders *.*.*.*.*.orders ",
		"rmqtopo.levels.100ms.5.dlx -> rmqtopo.levels.100ms.5.dlq  ",
		"rmqtopo.levels.100ms.5.x5 -> rmqtopo.levels.100ms.5.deliver 0.0.0.0.0.# ",
		"rmqtopo.levels.100ms.5.x5 -> rmqtopo.levels.100ms.5.q0.100ms 0.0.0.0.1.# ",
		"rmqtopo.levels.100ms.5.x5 -> rmqtopo.levels.100ms.5.q1.200ms 0.0.0.1.*.# ",
		"rmqtopo.levels.100ms.5.x5 -> rmqtopo.levels.100ms.5.q2.400ms 0.0.1.*.*.# ",
		"rmqtopo.levels.100ms.5.x5 -> rmqtopo.levels.100ms.5.q3.800ms 0.1.*.*.*.# ",
		"rmqtopo.levels.100ms.5.x5 -> rmqtopo.levels.100ms.5.q4.1600ms 1.*.*.*.*.# ",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ladder bindings (-want +got):\n%s", diff)
	}
	// Stages 1..4 have k+1 bindings each (contract's tests check them).
	if stageBindings != 2+3+4+5 {
		t.Errorf("%d bindings on stages 1..4, want 14", stageBindings)
	}
	if _, ok := queues[contract.SharedWaitQueue(time.Second)]; !ok {
		t.Error("the shared-layout queue lost its wait queue")
	}
	counts := f.Spec.WaitQueueCounts()
	// Jittered delays 200ms, 400ms, 800ms: 8 steps of 100ms shared, 2+4+8
	// per attempt; plus audit's 1s.
	if want := (map[Layout]int{LayoutShared: 9, LayoutPerAttempt: 15, LayoutLevels: 5}); !cmp.Equal(want, counts) {
		t.Errorf("WaitQueueCounts() = %v, want %v", counts, want)
	}
}

func attemptOf(b topology.Binding) string {
	s, _ := b.Arguments[contract.HeaderAttempt].(string)
	return s
}

func TestLevelsValidation(t *testing.T) {
	tests := []struct{ name, spec, want string }{
		{"jitter without levels", "version: 1\nlayout: shared\nqueues:\n  - name: a\n    retry: {fixed: {delay: 1s, attempts: 2, jitter: full}}\n",
			`jitter needs layout levels`},
		{"delay beyond the ladder", "version: 1\nlayout: levels\nlevels: {max: 1s}\nqueues:\n  - name: a\n    retry: {delays: [2s]}\n",
			`beyond the delay ladder's maximum 1.5s`},
		{"max below resolution", "version: 1\nlevels: {resolution: 1s, max: 500ms}\n", `below the resolution`},
		{"unknown jitter", "version: 1\nqueues:\n  - name: a\n    retry: {fixed: {delay: 1s, attempts: 2, jitter: half}}\n",
			`unknown jitter "half"`},
		{"wildcard word", "version: 1\nlevels: {max: 1s}\nqueues:\n  - name: a.*.b\n", `read as wildcards`},
		{"collision", "version: 1\nlevels: {max: 1s}\nqueues:\n  - name: rmqtopo.levels.100ms.4.dlq\n", `collides`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tt.spec))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse error = %v; want one containing %q", err, tt.want)
			}
		})
	}
}

func TestNoLadderWithoutLevels(t *testing.T) {
	f, err := Parse("t.yaml", []byte("version: 1\nqueues:\n  - name: a\n    retry: {delays: [1s]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range Expand(f).Queues {
		if strings.HasPrefix(q.Name, contract.LevelsPrefix) {
			t.Errorf("a spec without levels got %q", q.Name)
		}
	}
}
