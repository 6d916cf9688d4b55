package opsdata

// NoteUnreadable is the note of a message left in place because its
// x-death header could not be read.
const NoteUnreadable = "unreadable x-death, left in place"

// NoteWouldMove is the note of a message a dry run would have moved: a
// dry run leaves every message, and counts these under it.
const NoteWouldMove = "would move (dry run)"

// Result counts what a pass did.
type Result struct {
	Queue  string `json:"queue"`
	Target string `json:"target,omitempty"`
	// Depth is the number of ready messages when the pass started.
	Depth   int `json:"depth"`
	Scanned int `json:"scanned"`
	Moved   int `json:"moved"`
	// Left counts examined messages left in place by choice, LeftBy by note.
	Left   int            `json:"left"`
	LeftBy map[string]int `json:"left_by,omitempty"`
	// Failed counts messages chosen for a move that stayed in the source
	// because the move was not confirmed (nacked, returned, interrupted).
	Failed int `json:"failed"`
	// Unexamined counts deliveries that arrived past the end of the pass;
	// they were requeued untouched.
	Unexamined int `json:"unexamined,omitempty"`
	// Stopped says why the pass ended before examining Depth messages.
	Stopped  string   `json:"stopped,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
	// ResetHeaders names the headers the move dropped from the messages
	// it moved (replay: see ops.ReplayHeaders); every other header was
	// kept.
	ResetHeaders []string `json:"reset_headers,omitempty"`
}

// Unreadable counts messages left in place because of their x-death header.
func (r Result) Unreadable() int { return r.LeftBy[NoteUnreadable] }

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
