package spec

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/internal/waitguard"
)

func TestAnchorsAndMergeKeys(t *testing.T) {
	src := `version: 1
retry_policies:
  base: &sched
    delays: [1s, 2s]
queues:
  - &q
    name: a
    type: quorum
    retry: *sched
  - <<: *q
    name: b
    type: classic
`
	f, err := Parse("anchors.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		Name, Type string
		Delays     []time.Duration
	}
	var gots []got
	for _, q := range f.Spec.Queues {
		gots = append(gots, got{q.Name, q.Type, q.Retry.Delays()})
	}
	want := []got{
		{"a", TypeQuorum, []time.Duration{time.Second, 2 * time.Second}},
		{"b", TypeClassic, []time.Duration{time.Second, 2 * time.Second}},
	}
	if diff := cmp.Diff(want, gots); diff != "" {
		t.Errorf("queues (-want +got):\n%s", diff)
	}
}

func TestAliasBombFailsFast(t *testing.T) {
	var b strings.Builder
	b.WriteString("version: 1\nx0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n")
	for i := 1; i <= 9; i++ {
		b.WriteString("x" + string(rune('0'+i)) + ": &a" + string(rune('0'+i)) + " [")
		for j := 0; j < 10; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*a" + string(rune('0'+i-1)))
		}
		b.WriteString("]\n")
	}
	// Expanded, the bomb is 10^10 nodes: a Parse without the limit would
	// not return for hours. The watchdog turns that into a failure: a
	// guard, not a timing goal. Parse needs milliseconds (4 ms measured).
	guard := waitguard.For(10 * time.Millisecond)
	done := make(chan error, 1)
	go func() {
		_, err := Parse("bomb.yaml", []byte(b.String()))
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(guard):
		t.Fatalf("Parse of an alias bomb still running after %v", guard)
	}
	var es Errors
	if !errors.As(err, &es) || !strings.Contains(es.Error(), "expands to too many nodes") {
		t.Fatalf("Parse of an alias bomb: %v, want an expansion error", err)
	}
}
