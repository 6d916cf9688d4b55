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
	quit   chan struct{}
	once   sync.Once
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
	return &Reporter[T]{w: w, o: o, start: start, quit: make(chan struct{})}
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
	if !r.updated || r.paused || !r.o.Terminal && r.ticks%r.o.Every != 0 {
		return
	}
	line := r.o.Line(r.last, now.Sub(r.start))
	if r.o.Terminal {
		fmt.Fprintf(r.w, "\r\x1b[K%s", line)
		r.shown = true
		return
	}
	fmt.Fprintln(r.w, line)
}
