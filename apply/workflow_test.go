package apply_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rmqtopo/rmqtopo/apply"
	"github.com/rmqtopo/rmqtopo/apply/target"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/plan/planjson"
	"github.com/rmqtopo/rmqtopo/topology"
)

// fakeClock advances by each wait at once, so lock waits take no real
// time; waits lists them.
type fakeClock struct {
	now   time.Time
	waits []time.Duration
}

func (c *fakeClock) Now() time.Time { return c.now }
func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.waits = append(c.waits, d)
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

var (
	errLocked  = fmt.Errorf("fake: locked: %w", target.ErrLocked)
	errNoVhost = fmt.Errorf("fake: no vhost: %w", target.ErrVhostNotFound)
)

// fakeBroker is a broker of one vhost, vh: reads return its states in
// turn (the last one again once they run out), and Lock fails with
// lockErrs in turn before it succeeds.
type fakeBroker struct {
	*fake
	states   []*topology.State
	reads    int
	lockErrs []error
	locks    []string
}

func (b *fakeBroker) Read(ctx context.Context, vhosts []string) (*topology.State, error) {
	st := b.states[min(b.reads, len(b.states)-1)]
	b.reads++
	return st, nil
}

func (b *fakeBroker) Count(ctx context.Context, st *topology.State, queues map[string][]string) error {
	return nil
}

func (b *fakeBroker) Lock(ctx context.Context, vhost string) error {
	b.locks = append(b.locks, vhost)
	if len(b.lockErrs) == 0 {
		return nil
	}
	err := b.lockErrs[0]
	b.lockErrs = b.lockErrs[1:]
	return err
}

func (b *fakeBroker) broker() apply.Backend {
	return apply.Backend{Target: b.fake, Source: b, Locker: b}
}

// existing is the state of vh holding the given exchanges.
func existing(exchanges ...string) *topology.State {
	st := topology.NewState([]string{vh})
	st.Topology.Vhosts = []string{vh}
	for _, n := range exchanges {
		st.Topology.Exchanges = append(st.Topology.Exchanges, ex(n))
	}
	return st
}

func request(clock *fakeClock, timeout time.Duration) apply.Request {
	return apply.Request{
		Desired:     topology.Topology{Vhosts: []string{vh}, Exchanges: []topology.Exchange{ex("x")}},
		Choices:     plan.Choices{Specs: map[string]string{vh: "s"}},
		LockTimeout: timeout,
		Clock:       clock,
	}
}

// While another apply holds the lock, Run polls it with doubling pauses
// (at most two seconds, never past the timeout), says once that it waits
// and once that the wait is over, and applies once the lock is free.
func TestRunWaitsForTheLock(t *testing.T) {
	b := &fakeBroker{fake: &fake{}, states: []*topology.State{existing()}, lockErrs: []error{errLocked, errLocked, errLocked}}
	clock := &fakeClock{now: time.Unix(0, 0)}
	req := request(clock, 10*time.Second)
	var said []string
	ended := 0
	var latest func() error
	req.OnLockWait = func(v string, l func() error) func() { said = append(said, v); latest = l; return func() { ended++ } }
	out, err := apply.Run(context.Background(), b.broker(), req)
	if err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	if want := []time.Duration{100 * ms, 200 * ms, 400 * ms}; !slices.Equal(clock.waits, want) {
		t.Errorf("waits %v, want %v", clock.waits, want)
	}
	if !slices.Equal(said, []string{vh}) || ended != 1 || latest() != nil {
		t.Errorf("said it waits for %q and ended %d times (latest refusal %v), want once for %q, ended once, with no refusal after the lock", said, ended, latest(), vh)
	}
	if !out.Applied || out.Result.Created != 1 || !slices.Contains(b.calls, "declare-exchange x") {
		t.Errorf("after the wait: applied %t, result %+v, calls %q", out.Applied, out.Result, b.calls)
	}
}

// A lock held past the timeout fails as a held lock does, saying how long
// it waited, after pauses that add up to the timeout exactly; nothing is
// read or written. A zero timeout fails at once.
func TestRunLockTimeout(t *testing.T) {
	held := slices.Repeat([]error{errLocked}, 100)
	for _, tt := range []struct {
		timeout time.Duration
		waits   []time.Duration
	}{
		{0, nil},
		{time.Second, []time.Duration{100, 200, 400, 300}},
		{10 * time.Second, []time.Duration{100, 200, 400, 800, 1600, 2000, 2000, 2000, 900}},
	} {
		b := &fakeBroker{fake: &fake{}, states: []*topology.State{existing()}, lockErrs: slices.Clone(held)}
		clock := &fakeClock{now: time.Unix(0, 0)}
		_, err := apply.Run(context.Background(), b.broker(), request(clock, tt.timeout))
		if !errors.Is(err, errLocked) {
			t.Errorf("timeout %s: err %v, want the lock's", tt.timeout, err)
		}
		var lt *apply.LockTimeoutError
		if tt.timeout > 0 && (!errors.As(err, &lt) || lt.Waited != tt.timeout || lt.Vhost != vh) {
			t.Errorf("timeout %s: err %q does not say how long it waited", tt.timeout, err)
		}
		var want []time.Duration
		for _, w := range tt.waits {
			want = append(want, w*time.Millisecond)
		}
		if !slices.Equal(clock.waits, want) {
			t.Errorf("timeout %s: waits %v, want %v", tt.timeout, clock.waits, want)
		}
		if b.reads != 0 || len(b.calls) != 0 {
			t.Errorf("timeout %s: %d reads and calls %q before the lock", tt.timeout, b.reads, b.calls)
		}
	}
}

// A vhost that did not exist when Run locked, but that the read finds
// (someone created it meanwhile), is locked and read again before the
// plan is used.
func TestRunLocksAVhostThatAppeared(t *testing.T) {
	b := &fakeBroker{fake: &fake{}, states: []*topology.State{existing(), existing("x")}, lockErrs: []error{errNoVhost}}
	out, err := apply.Run(context.Background(), b.broker(), request(&fakeClock{}, 0))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(b.locks, []string{vh, vh}) || b.reads != 2 {
		t.Errorf("locks %q and %d reads, want the vhost locked twice and read twice", b.locks, b.reads)
	}
	if out.Plan.HasChanges() {
		t.Errorf("the plan of the second read has changes:\n%+v", out.Plan.Changes)
	}
}

// Review sees the plan before anything is written; its error stops Run.
func TestRunReviewRefuses(t *testing.T) {
	b := &fakeBroker{fake: &fake{}, states: []*topology.State{existing()}}
	req := request(&fakeClock{}, 0)
	no := errors.New("not approved")
	var seen plan.Plan
	req.Review = func(p *plan.Plan, st *topology.State) ([]plan.Diagnostic, error) { seen = *p; return nil, no }
	out, err := apply.Run(context.Background(), b.broker(), req)
	if !errors.Is(err, no) || out.Applied || len(b.calls) != 0 {
		t.Errorf("refused review: err %v, applied %t, calls %q", err, out.Applied, b.calls)
	}
	if len(seen.Changes) == 0 {
		t.Error("review saw no plan")
	}
}

// A saved plan whose broker changed since it was made is refused before
// review; one whose broker did not is applied.
func TestRunSavedPlan(t *testing.T) {
	made := existing()
	p := plan.Diff(made, request(nil, 0).Desired, plan.Choices{Specs: map[string]string{vh: "s"}})
	saved := planjson.New("http://broker", made, map[string]string{vh: "s"}, false, p, nil)
	for _, tt := range []struct {
		now   *topology.State
		stale bool
	}{{existing(), false}, {existing("other"), true}} {
		b := &fakeBroker{fake: &fake{}, states: []*topology.State{tt.now}}
		req := apply.Request{Saved: saved, SavedPath: "p.json", Choices: plan.Choices{Specs: saved.Specs}, Clock: &fakeClock{}}
		reviewed := false
		req.Review = func(*plan.Plan, *topology.State) ([]plan.Diagnostic, error) { reviewed = true; return nil, nil }
		out, err := apply.Run(context.Background(), b.broker(), req)
		if tt.stale {
			if err == nil || !strings.Contains(err.Error(), "the plan in p.json is stale") || reviewed || len(b.calls) != 0 {
				t.Errorf("stale plan: err %v, reviewed %t, calls %q", err, reviewed, b.calls)
			}
			continue
		}
		if err != nil || !reviewed || out.Result.Created != 1 {
			t.Errorf("fresh plan: err %v, reviewed %t, result %+v", err, reviewed, out.Result)
		}
	}
}
