// Package progress shows how far a long operation has come, about once a
// second, on a writer that is not its output (stderr), so that a JSON or
// piped output stays clean. An operation shorter than the first tick
// prints nothing.
package progress

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Options say how a Reporter shows a progress of type T.
type Options[T any] struct {
	// Line says where the operation is, elapsed after it began.
	Line func(v T, elapsed time.Duration) string
	// Terminal rewrites one line in place every tick. Elsewhere (a CI
	// log) a line is printed every Every ticks (0: every tick): often
	// enough to show a pipeline is alive, rarely enough for a readable
	// log.
	Terminal bool
	Every    int
	// Keep, when set, says whether next replaces last: updates that
	// arrive concurrently may arrive late.
	Keep func(last, next T) bool
	// WaitLine says what the operation waits for (see Reporter.Wait),
	// waited so far; nil shows "waiting for WHAT (WAITED)".
	WaitLine func(what string, waited time.Duration) string
	// WaitAfter is how long a wait lasts before the line names it (0: a
	// second): the many short calls of a busy operation, each a wait,
	// would otherwise hide its progress.
	WaitAfter time.Duration
}

// Reporter shows the latest progress it was given about once a second,
// from its first Update until Stop.
type Reporter[T any] struct {
	w       io.Writer
	o       Options[T]
	start   time.Time
	mu      sync.Mutex
	last    T
	updated bool
	ticks   int
	shown   bool // a terminal line is on screen
	// paused until the next Update, so that the line does not write over
	// a question (apply's approval).
	paused bool
	// waits are those begun and not ended, oldest first.
	waits []*wait
	quit  chan struct{}
	once  sync.Once
	// now is the clock Wait reads; tests set it.
	now func() time.Time
}

// wait is one thing the operation waits for, since when.
type wait struct {
	what  func() string
	since time.Time
}

// Start begins to tick; the caller must Stop the reporter.
func Start[T any](w io.Writer, o Options[T]) *Reporter[T] {
	r := newReporter(w, o, time.Now())
	go r.run()
	return r
}

func newReporter[T any](w io.Writer, o Options[T], start time.Time) *Reporter[T] {
	if o.Every < 1 {
		o.Every = 1
	}
	if o.WaitAfter <= 0 {
		o.WaitAfter = time.Second
	}
	if o.WaitLine == nil {
		o.WaitLine = func(what string, waited time.Duration) string {
			return fmt.Sprintf("waiting for %s (%s)", what, waited.Round(time.Second))
		}
	}
	return &Reporter[T]{w: w, o: o, start: start, quit: make(chan struct{}), now: time.Now}
}

func (r *Reporter[T]) run() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-r.quit:
			return
		case now := <-t.C:
			r.tick(now)
		}
	}
}

// Update records where the operation is, and ends a pause; it may be
// called concurrently.
func (r *Reporter[T]) Update(v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.updated || r.o.Keep == nil || r.o.Keep(r.last, v) {
		r.last = v
	}
	r.updated, r.paused = true, false
}

// Wait says, until end is called, that the operation waits for what (the
// lock and its holder, the broker's answer): while any wait lasts, the
// line names the oldest and how long it has lasted, not the step of the
// last Update, which belongs to another phase and would read as a hang.
// A wait shorter than Options.WaitAfter shows nothing. It may be called concurrently;
// end may be called more than once.
func (r *Reporter[T]) Wait(what string) (end func()) {
	return r.WaitFunc(func() string { return what })
}

// WaitFunc is Wait for a wait whose description changes as it lasts (the
// lock's holder, once the broker names it): what is called at each tick
// that shows the wait, and must not call the reporter.
func (r *Reporter[T]) WaitFunc(what func() string) (end func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := &wait{what: what, since: r.now()}
	r.waits = append(r.waits, w)
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			for i, x := range r.waits {
				if x == w {
					r.waits = append(r.waits[:i], r.waits[i+1:]...)
					break
				}
			}
		})
	}
}

// Pause hides the progress until the next Update.
func (r *Reporter[T]) Pause() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.paused = true
	r.clear()
}

// Stop ends the ticks and clears a terminal's line; it may be called more
// than once.
func (r *Reporter[T]) Stop() {
	r.once.Do(func() { close(r.quit) })
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clear()
}

// clear removes a terminal's line; r.mu is held.
func (r *Reporter[T]) clear() {
	if r.shown {
		fmt.Fprint(r.w, "\r\x1b[K")
		r.shown = false
	}
}

// tick shows the progress, as of now, if it is time to.
func (r *Reporter[T]) tick(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.quit:
		return // a tick that raced Stop
	default:
	}
	r.ticks++
	// The oldest wait is the longest.
	waiting := len(r.waits) > 0 && now.Sub(r.waits[0].since) >= r.o.WaitAfter
	if !r.updated && !waiting || r.paused || !r.o.Terminal && r.ticks%r.o.Every != 0 {
		return
	}
	var line string
	if waiting {
		line = r.o.WaitLine(r.waits[0].what(), now.Sub(r.waits[0].since))
	} else {
		line = r.o.Line(r.last, now.Sub(r.start))
	}
	if r.o.Terminal {
		fmt.Fprintf(r.w, "\r\x1b[K%s", line)
		r.shown = true
		return
	}
	fmt.Fprintln(r.w, line)
}
