package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/rmqtopo/rmqtopo/apply"
)

// progress shows a long apply's progress on stderr, never on stdout, so
// that a JSON or piped plan stays clean. On a terminal it is one line,
// rewritten every second; elsewhere (a CI log) a line every pipelineEvery
// seconds.
// An apply shorter than the first tick prints nothing.
type progress struct {
	w        io.Writer
	terminal bool
	start    time.Time
	mu       sync.Mutex
	last     apply.Progress
	ticks    int
	shown    bool // a terminal line is on screen
	// paused while the plan is shown and approved: the line must not
	// write over the question.
	paused bool
	*ticker
}

// pipelineEvery is how often a non-terminal gets a progress line: often
// enough to show a pipeline is alive, rarely enough for a readable log.
const pipelineEvery = 2

func newProgress(w io.Writer, terminal bool) *progress {
	p := &progress{w: w, terminal: terminal, start: time.Now()}
	p.ticker = everySecond(func() { p.tick(time.Now()) })
	return p
}

// update records where the apply is; apply calls it concurrently.
func (p *progress) update(a apply.Progress) {
	p.mu.Lock()
	if a.Done >= p.last.Done || a.Step == apply.StepPlanning {
		p.last = a
	}
	p.paused = false
	p.mu.Unlock()
}

// pause hides the progress until the next update.
func (p *progress) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = true
	p.clear()
}

// clear removes a terminal's line; p.mu is held.
func (p *progress) clear() {
	if p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.shown = false
	}
}

// tick shows the progress, as of now, if it is time to.
func (p *progress) tick(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ticks++
	if p.paused || !p.terminal && p.ticks%pipelineEvery != 0 {
		return
	}
	line := progressLine(p.last, now.Sub(p.start))
	if p.terminal {
		fmt.Fprintf(p.w, "\r\x1b[K%s", line)
		p.shown = true
		return
	}
	fmt.Fprintln(p.w, line)
}

// done stops the ticks and clears a terminal's line.
func (p *progress) done() {
	p.stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
}

// progressLine says where an apply is: the step, changes done of the
// total, and the time since it began.
func progressLine(a apply.Progress, elapsed time.Duration) string {
	el := elapsed.Round(time.Second)
	switch {
	case a.Step == "" || a.Step == apply.StepPlanning:
		return fmt.Sprintf("apply: %s (%s)", apply.StepPlanning, el)
	case a.Step == apply.StepRecords:
		return fmt.Sprintf("apply: %d/%d changes, %s (%s)", a.Done, a.Total, a.Step, el)
	}
	return fmt.Sprintf("apply: %d/%d changes, %s phase (%s)", a.Done, a.Total, a.Step, el)
}
