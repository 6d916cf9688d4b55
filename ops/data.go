package ops

import "github.com/rmqtopo/rmqtopo/internal/opsdata"

// What the commands give back is plain data in internal/opsdata, which
// render draws as text or JSON without depending on the broker; these
// are the same types, and ops's public API.

type (
	// Shown is what dlq show read: the head of a queue.
	Shown = opsdata.Shown
	// Message is a dead-lettered message decoded for an operator (Decode).
	Message = opsdata.Message
	// Result counts what a pass did.
	Result = opsdata.Result
	// Total adds up the results of several passes (Sum).
	Total = opsdata.Total
)

// NoteUnreadable is the note of a message left in place because its
// x-death header could not be read (Result.Unreadable counts them).
const NoteUnreadable = opsdata.NoteUnreadable

// Sum adds up results.
func Sum(results []Result) Total { return opsdata.Sum(results) }
