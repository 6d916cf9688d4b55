package ops

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rmqtopo/rmqtopo/internal/english"
)

// The views of dlq show, replay and sweep: what they print on stdout, as
// text or JSON, from what ops gave back.

// ShowJSON writes what dlq show read as one indented JSON document.
func ShowJSON(w io.Writer, s Shown) error {
	s.Messages = nonNil(s.Messages)
	return writeJSON(w, s)
}

// bodyPreview is how much of a body the text output shows.
const bodyPreview = 200

// ShowText writes what dlq show read, a paragraph per message.
func ShowText(w io.Writer, s Shown) error {
	fmt.Fprintf(w, "queue %s (vhost %s): %d %s, showing %d\n", s.Queue, s.Vhost, s.Depth, english.Plural(s.Depth, "message", "messages"), len(s.Messages))
	for _, m := range s.Messages {
		shownMessage(w, m)
	}
	return nil
}

// shownMessage writes one message's paragraph of dlq show.
func shownMessage(w io.Writer, m Message) {
	fmt.Fprintf(w, "\n#%d", m.Position)
	if m.MessageID != "" {
		fmt.Fprintf(w, " id %s", m.MessageID)
	}
	if m.Timestamp != nil {
		fmt.Fprintf(w, " published %s", m.Timestamp.Format(time.RFC3339))
	}
	fmt.Fprintln(w)
	reason := m.Reason
	if m.ReasonSource != "" {
		reason += " (from " + m.ReasonSource + ")"
	}
	fmt.Fprintf(w, "  reason:         %s\n", reason)
	switch {
	case m.Attempt != nil:
		fmt.Fprintf(w, "  attempt:        %d\n", *m.Attempt)
	case m.AttemptRaw != "":
		fmt.Fprintf(w, "  attempt:        unreadable (%s)\n", m.AttemptRaw)
	}
	if m.DeathsUnreadable != "" {
		fmt.Fprintf(w, "  deaths:         unreadable (%s)\n", m.DeathsUnreadable)
	} else {
		fmt.Fprintf(w, "  deaths:         %d\n", m.Deaths)
	}
	if m.FirstFailure != "" {
		fmt.Fprintf(w, "  first failure:  %s\n", m.FirstFailure)
	}
	if m.LastError != "" {
		fmt.Fprintf(w, "  last error:     %s\n", m.LastError)
	}
	fmt.Fprintf(w, "  original route: exchange %q, routing key %q\n", m.OriginalExchange, m.OriginalRoutingKey)
	if m.ReplayCount > 0 {
		fmt.Fprintf(w, "  replayed:       %d %s\n", m.ReplayCount, english.Plural(int(m.ReplayCount), "time", "times"))
	}
	body := m.Body
	if len(body) > bodyPreview {
		body = body[:bodyPreview] + "…"
	}
	kind := m.ContentType
	if kind == "" {
		kind = "no content type"
	}
	fmt.Fprintf(w, "  body:           %s, %s, %s: %s\n", english.Count(m.Size, "byte", "bytes"), kind, m.BodyEncoding, body)
}

// ResultsJSON writes what the passes of a replay or sweep did, and
// their total, as one JSON document.
func ResultsJSON(w io.Writer, results []Result) error {
	return writeJSON(w, struct {
		Results []Result `json:"results"`
		Total   Total    `json:"total"`
	}{nonNil(results), Sum(results)})
}

// ResultsText writes what the passes of a replay or sweep did: a line
// per pass and, for several, their total.
func ResultsText(w io.Writer, results []Result) error {
	for _, r := range results {
		fmt.Fprintf(w, "%s -> %s: %s\n", r.Queue, r.Target, passSummary(r))
	}
	if len(results) > 1 {
		total := Sum(results)
		fmt.Fprintf(w, "total: %s\n", passSummary(Result{Moved: total.Moved, Left: total.Left, Failed: total.Failed, LeftBy: total.LeftBy}))
	}
	return nil
}

// passSummary says what one pass did, in a line.
func passSummary(r Result) string {
	s := fmt.Sprintf("moved %d, left %d, failed %d", r.Moved, r.Left, r.Failed)
	// A dry run moves nothing: it says what would move, and leaves the
	// rest as a pass would.
	wouldMove := r.LeftBy[NoteWouldMove]
	if wouldMove > 0 {
		s = fmt.Sprintf("dry run: would move %d, left %d, failed %d", wouldMove, r.Left-wouldMove, r.Failed)
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(r.LeftBy)) {
		if k != NoteWouldMove {
			parts = append(parts, fmt.Sprintf("%d %s", r.LeftBy[k], k))
		}
	}
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, "; ") + ")"
	}
	if r.Stopped != "" {
		s += "; stopped: " + r.Stopped
	}
	return s
}

// nonNil makes an empty list a JSON [] rather than null: tools reading
// the views iterate without checking.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// writeJSON writes v as one indented JSON document, as the dlq views'
// JSON always was.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
