package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/apply"
)

// The progress of a long apply, driven tick by tick: on a terminal one
// line rewritten each second, paused while the plan is shown and
// approved, cleared at the end; in a pipeline a line every other tick.
func TestProgress(t *testing.T) {
	for _, terminal := range []bool{true, false} {
		var out strings.Builder
		p := &progress{w: &out, terminal: terminal, start: time.Unix(0, 0), ticker: &ticker{quit: make(chan struct{})}}
		at := func(s int) time.Time { return time.Unix(int64(s), 0) }
		p.update(apply.Progress{Step: apply.StepPlanning})
		p.tick(at(1))
		p.pause() // the plan is shown, the user asked
		p.tick(at(2))
		p.update(apply.Progress{Step: apply.StepRecords, Total: 16000})
		p.tick(at(3))
		p.update(apply.Progress{Step: "queue", Done: 9000, Total: 16000})
		p.update(apply.Progress{Step: "exchange", Done: 8999, Total: 16000}) // late: not shown
		p.tick(at(4))
		p.tick(at(5))
		p.done()
		want := "\r\x1b[Kapply: reading the broker and planning (1s)\r\x1b[K" +
			"\r\x1b[Kapply: 0/16000 changes, recording ownership (3s)" +
			"\r\x1b[Kapply: 9000/16000 changes, queue phase (4s)" +
			"\r\x1b[Kapply: 9000/16000 changes, queue phase (5s)\r\x1b[K"
		if !terminal {
			want = "apply: 9000/16000 changes, queue phase (4s)\n"
		}
		if diff := cmp.Diff(want, out.String()); diff != "" {
			t.Errorf("terminal %t (-want +got):\n%s", terminal, diff)
		}
	}
}
