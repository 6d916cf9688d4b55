package apply

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rmqtopo/rmqtopo/apply/target"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

// runner runs a plan's changes phase by phase and keeps what it made.
type runner struct {
	t     target.Target
	opts  Options
	total int
	count atomic.Int64
	mu    sync.Mutex
	done  []plan.Change
}

// report tells opts.Progress, if any, where the apply is.
func (r *runner) report(step string, done int) {
	if r.opts.Progress != nil {
		r.opts.Progress(Progress{Step: step, Done: done, Total: r.total})
	}
}

// phases runs steps, in order, one phase at a time, and stops at the end
// of the first phase with a failure.
func (r *runner) phases(ctx context.Context, steps []plan.Change) error {
	for i := 0; i < len(steps); {
		j := i
		for j < len(steps) && steps[j].Phase() == steps[i].Phase() {
			j++
		}
		// Named as it starts, so that a long change (a migration) is not
		// shown under the phase before it, or "recording ownership".
		r.report(steps[i].Phase().String(), int(r.count.Load()))
		if err := r.phase(ctx, steps[i:j]); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// phase runs one phase's changes with bounded concurrency (one at a time
// when the phase is not Concurrent). After the first failure no new change
// starts; those in flight finish.
func (r *runner) phase(ctx context.Context, steps []plan.Change) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan plan.Change)
	var (
		wg    sync.WaitGroup
		errMu sync.Mutex
		errs  []error
	)
	fail := func(err error) {
		errMu.Lock()
		defer errMu.Unlock()
		if errs = append(errs, err); len(errs) == 1 {
			cancel()
		}
	}
	n := min(r.opts.Concurrency, len(steps))
	if !steps[0].Phase().Concurrent() {
		n = 1
	}
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.work(ctx, work, fail)
		}()
	}
feed:
	for _, c := range steps {
		select {
		case work <- c:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if len(errs) == 0 {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interrupted during %s: %w", steps[0].Phase(), err)
		}
		return nil
	}
	return firstCause(errs)
}

// work makes the changes it receives until work closes, handing each
// failure to fail.
func (r *runner) work(ctx context.Context, work <-chan plan.Change, fail func(error)) {
	for c := range work {
		if err := r.exec(ctx, c); err != nil {
			fail(err)
			continue
		}
		r.mu.Lock()
		r.done = append(r.done, c)
		r.mu.Unlock()
		r.report(c.Phase().String(), int(r.count.Add(1)))
	}
}

// firstCause is the error of a phase's failures: the first that is not
// the interruption the first failure caused (the others are usually that
// interruption, or the same problem again), and how many more failed.
func firstCause(errs []error) error {
	first := errs[0]
	for _, e := range errs {
		if !errors.Is(e, context.Canceled) {
			first = e
			break
		}
	}
	if more := len(errs) - 1; more > 0 {
		return fmt.Errorf("%w (and %d more failed changes)", first, more)
	}
	return first
}

func (r *runner) exec(ctx context.Context, c plan.Change) error {
	a := c.Address
	err := r.do(ctx, c)
	if err == nil {
		return nil
	}
	what := fmt.Sprintf("%s %s", verb(c), a)
	if errors.Is(err, target.ErrNotEmpty) {
		return fmt.Errorf("%s: stopped: %w; it was kept, because deleting it could lose messages that arrived after the plan was made or that its consumers hold; plan again", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func verb(c plan.Change) string {
	switch c.Action {
	case plan.Create:
		if c.Address.Kind == topology.KindBinding {
			return "bind"
		}
		return "create"
	case plan.Delete:
		if c.Address.Kind == topology.KindBinding {
			return "unbind"
		}
		return "delete"
	case plan.Replace:
		return "replace"
	case plan.Update:
		return "update"
	}
	return c.Action.String()
}
