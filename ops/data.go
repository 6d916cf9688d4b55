package ops

import "github.com/rmqtopo/rmqtopo/internal/move"

// Result counts what a pass did: the engine's result (internal/move),
// which the commands give back as it is.
type Result = move.Result

// NoteUnreadable is the note of a message left in place because its
// x-death header could not be read.
const NoteUnreadable = "unreadable x-death, left in place"

// NoteWouldMove is the note of a message a dry run would have moved: a
// dry run leaves every message, and counts these under it.
const NoteWouldMove = "would move (dry run)"

// Total adds up the results of several passes.
type Total struct {
	Scanned    int            `json:"scanned"`
	Moved      int            `json:"moved"`
	Left       int            `json:"left"`
	LeftBy     map[string]int `json:"left_by,omitempty"`
	Failed     int            `json:"failed"`
	Unexamined int            `json:"unexamined,omitempty"`
}

// Sum adds up results.
func Sum(results []Result) Total {
	var t Total
	for _, r := range results {
		t.Scanned += r.Scanned
		t.Moved += r.Moved
		t.Left += r.Left
		t.Failed += r.Failed
		t.Unexamined += r.Unexamined
		for k, n := range r.LeftBy {
			if t.LeftBy == nil {
				t.LeftBy = map[string]int{}
			}
			t.LeftBy[k] += n
		}
	}
	return t
}
