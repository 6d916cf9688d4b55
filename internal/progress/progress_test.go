package progress

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type step struct {
	name        string
	done, total int
}

func line(s step, elapsed time.Duration) string {
	return fmt.Sprintf("%d/%d %s (%s)", s.done, s.total, s.name, elapsed)
}

func at(s int) time.Time { return time.Unix(int64(s), 0) }

// A long operation's progress, driven tick by tick: on a terminal one line
// rewritten each tick, paused while a question is asked, cleared at the
// end, a late update not shown; in a pipeline a line every other tick.
func TestReporter(t *testing.T) {
	for _, terminal := range []bool{true, false} {
		var out strings.Builder
		r := newReporter(&out, Options[step]{Line: line, Terminal: terminal, Every: 2,
			Keep: func(last, next step) bool { return next.done >= last.done }}, at(0))
		r.Update(step{name: "planning"})
		r.tick(at(1))
		r.Pause()
		r.tick(at(2))
		r.Update(step{name: "records", total: 9})
		r.tick(at(3))
		r.Update(step{name: "queues", done: 5, total: 9})
		r.Update(step{name: "exchanges", done: 4, total: 9}) // late: not shown
		r.tick(at(4))
		r.tick(at(5))
		r.Stop()
		r.tick(at(6)) // raced Stop: not shown
		want := "\r\x1b[K0/0 planning (1s)\r\x1b[K" +
			"\r\x1b[K0/9 records (3s)" +
			"\r\x1b[K5/9 queues (4s)" +
			"\r\x1b[K5/9 queues (5s)\r\x1b[K"
		if !terminal {
			want = "5/9 queues (4s)\n"
		}
		if diff := cmp.Diff(want, out.String()); diff != "" {
			t.Errorf("terminal %t (-want +got):\n%s", terminal, diff)
		}
	}
}

// Off a terminal with Every 0, every tick after the first update prints
// the latest progress; none before it.
func TestReporterEveryTick(t *testing.T) {
	var out strings.Builder
	r := newReporter(&out, Options[step]{Line: line}, at(0))
	r.tick(at(1))
	r.Update(step{name: "moving", done: 1, total: 3})
	r.tick(at(2))
	r.Update(step{name: "moving", done: 2, total: 3})
	r.tick(at(3))
	r.Stop()
	r.Stop() // twice is fine
	if diff := cmp.Diff("1/3 moving (2s)\n2/3 moving (3s)\n", out.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// A wait names what it waits for and how long, instead of the step of the
// last update, once it has lasted WaitAfter; waits that overlap show the
// oldest; once all end, the step shows again. A wait shows even before
// any update.
func TestReporterWaits(t *testing.T) {
	var out strings.Builder
	r := newReporter(&out, Options[step]{Line: line, WaitLine: func(what string, waited time.Duration) string {
		return fmt.Sprintf("waiting for %s (%s)", what, waited)
	}}, at(0))
	clock := at(0)
	r.now = func() time.Time { return clock }
	lock := r.Wait("the lock")
	r.tick(at(1))
	r.Update(step{name: "planning"})
	clock = at(2)
	holder := "nobody known"
	broker := r.WaitFunc(func() string { return "the broker, " + holder })
	r.tick(at(3))
	holder = "rabbit@a"
	lock()
	lock() // twice: no harm
	r.tick(at(4))
	broker()
	r.tick(at(5))
	clock = at(5)
	short := r.Wait("a quick answer")
	r.tick(at(5)) // not yet a second
	short()
	want := "waiting for the lock (1s)\n" +
		"waiting for the lock (3s)\n" +
		"waiting for the broker, rabbit@a (2s)\n" +
		"0/0 planning (5s)\n" +
		"0/0 planning (5s)\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
