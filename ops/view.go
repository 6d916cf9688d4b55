package ops

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// The views of dlq show, replay and sweep: what they print on stdout, as
// text or JSON.

// LookingIsDelivery says when reading a queue counts as a delivery: a
// quorum queue counts every delivery of a message, requeued or not, in
// its x-delivery-count and against its delivery limit. Classic queues
// count nothing.
func LookingIsDelivery(q Queue) string {
	if q.Type != "quorum" {
		return ""
	}
	limit := ""
	if n := q.DeliveryLimit; n > 0 {
		limit = fmt.Sprintf(", towards its delivery limit of %d", n)
	}
	return fmt.Sprintf("note: %q is a quorum queue: reading it is a delivery, so each message read gets x-delivery-count one higher%s", q.Name, limit)
}

// Shown is what dlq show read: the head of a queue.
type Shown struct {
	Vhost string `json:"vhost"`
	Queue string `json:"queue"`
	Type  string `json:"type"`
	// ReadIsDelivery: reading raised each message's x-delivery-count.
	ReadIsDelivery bool      `json:"read_is_delivery"`
	Depth          int       `json:"depth"`
	Messages       []Message `json:"messages"`
}

// WriteJSON writes what dlq show read as one indented JSON document.
func (s Shown) WriteJSON(w io.Writer) error {
	s.Messages = nonNil(s.Messages)
	return writeJSON(w, s)
}

// bodyPreview is how much of a body the text output shows.
const bodyPreview = 200

// WriteText writes what dlq show read, a paragraph per message.
func (s Shown) WriteText(w io.Writer) error {
	vhost, queue, depth, msgs := s.Vhost, s.Queue, s.Depth, s.Messages
	fmt.Fprintf(w, "queue %s (vhost %s): %d %s, showing %d\n", queue, vhost, depth, plural(depth, "message", "messages"), len(msgs))
	for _, m := range msgs {
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
			fmt.Fprintf(w, "  replayed:       %d %s\n", m.ReplayCount, plural(int(m.ReplayCount), "time", "times"))
		}
		body := m.Body
		if len(body) > bodyPreview {
			body = body[:bodyPreview] + "…"
		}
		kind := m.ContentType
		if kind == "" {
			kind = "no content type"
		}
		fmt.Fprintf(w, "  body:           %d bytes, %s, %s: %s\n", m.Size, kind, m.BodyEncoding, body)
	}
	return nil
}

// Total adds up the results of several passes.
type Total struct {
	Scanned    int            `json:"scanned"`
	Moved      int            `json:"moved"`
	Left       int            `json:"left"`
	LeftBy     map[string]int `json:"left_by,omitempty"`
	Failed     int            `json:"failed"`
	Unexamined int            `json:"unexamined,omitempty"`
}

// Summary says what one pass did, in a line.
func Summary(r Result) string {
	s := fmt.Sprintf("moved %d, left %d, failed %d", r.Moved, r.Left, r.Failed)
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(r.LeftBy)) {
		parts = append(parts, fmt.Sprintf("%d %s", r.LeftBy[k], k))
	}
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, "; ") + ")"
	}
	if r.Stopped != "" {
		s += "; stopped: " + r.Stopped
	}
	return s
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

// WriteResults writes what the passes of a replay or sweep did: a line
// per pass and, for several, their total; or one JSON document.
func WriteResults(w io.Writer, asJSON bool, results []Result) error {
	total := Sum(results)
	if asJSON {
		return writeJSON(w, struct {
			Results []Result `json:"results"`
			Total   Total    `json:"total"`
		}{nonNil(results), total})
	}
	for _, r := range results {
		fmt.Fprintf(w, "%s -> %s: %s\n", r.Queue, r.Target, Summary(r))
	}
	if len(results) > 1 {
		fmt.Fprintf(w, "total: %s\n", Summary(Result{Moved: total.Moved, Left: total.Left, Failed: total.Failed, LeftBy: total.LeftBy}))
	}
	return nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
