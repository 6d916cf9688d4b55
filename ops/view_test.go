package ops_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rmqtopo/rmqtopo/internal/golden"
	"github.com/rmqtopo/rmqtopo/ops"
)

// The values are written by hand, as ops gives them back, so that the
// goldens show the views alone. The goldens began here, moved to render
// and came back unchanged.

func intp(n int) *int       { return &n }
func int64p(n int64) *int64 { return &n }

// shown is a quorum DLQ's head: a message with every field the text
// shows, and one whose attempt and deaths are unreadable and whose body
// is longer than the text's preview.
func shown() ops.Shown {
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	long := strings.Repeat("x", 210)
	return ops.Shown{Vhost: "shop", Queue: "orders.dlq", Type: "quorum", ReadIsDelivery: true, Depth: 3, Messages: []ops.Message{
		{Position: 1, MessageID: "m1", Timestamp: &at, ContentType: "application/json", Reason: "rejected", ReasonSource: "header",
			Attempt: intp(3), Deaths: 2, FirstFailure: "2026-11-25T09:00:00Z", LastError: "boom",
			OriginalExchange: "shop", OriginalRoutingKey: "order.created", ReplayCount: 1, Size: 11, Body: `{"id": 42}`, BodyEncoding: "text"},
		{Position: 2, AttemptRaw: "three", DeathsUnreadable: "not a list", OriginalExchange: "", OriginalRoutingKey: "orders",
			ReplayCount: 2, Size: len(long), Body: long, BodyEncoding: "text"},
	}}
}

// shownBinary is a classic queue's one message: a binary body, headers,
// a delivery as ops decodes it, and nothing of the contract's headers.
func shownBinary() ops.Shown {
	return ops.Shown{Vhost: "/", Queue: "legacy.dlq", Type: "classic", Depth: 1, Messages: []ops.Message{
		{Position: 1, CorrelationID: "c-7", Exchange: "", RoutingKey: "legacy.dlq", Redelivered: true, DeliveryCount: int64p(4),
			Reason: "unknown", Deaths: 1, OriginalExchange: "legacy", OriginalRoutingKey: "job", Size: 4, Body: "AAEC/w==",
			BodyEncoding: "base64", Headers: map[string]any{"x-first-death-reason": "expired", "tenant": "acme"}},
	}}
}

// results are a sweep's two passes: one with messages left by two notes,
// one stopped with a failed move and a warning.
func results() []ops.Result {
	return []ops.Result{
		{Queue: "a.dlq", Target: "a.parking-lot", Depth: 5, Scanned: 5, Moved: 3, Left: 2, LeftBy: map[string]int{ops.NoteUnreadable: 1, "below threshold": 1}},
		{Queue: "b.dlq", Target: "b.parking-lot", Depth: 2, Scanned: 1, Moved: 0, Failed: 1, Stopped: "interrupted", Warnings: []string{"w"}},
	}
}

// replayed is a replay's pass: filtered, with late deliveries left
// unexamined and the headers it dropped.
func replayed() []ops.Result {
	return []ops.Result{{Queue: "orders.dlq", Target: "orders", Depth: 4, Scanned: 4, Moved: 2, Left: 2,
		LeftBy: map[string]int{"filter": 2}, Unexamined: 1, ResetHeaders: []string{"rmqtopo-attempt", "x-death"}}}
}

// TestDLQGolden: the views of dlq show, replay and sweep, as text and JSON.
func TestDLQGolden(t *testing.T) {
	for name, write := range map[string]func(*bytes.Buffer) error{
		"show.txt":         func(b *bytes.Buffer) error { return ops.ShowText(b, shown()) },
		"show.json":        func(b *bytes.Buffer) error { return ops.ShowJSON(b, shown()) },
		"show-binary.txt":  func(b *bytes.Buffer) error { return ops.ShowText(b, shownBinary()) },
		"show-binary.json": func(b *bytes.Buffer) error { return ops.ShowJSON(b, shownBinary()) },
		"show-empty.txt": func(b *bytes.Buffer) error {
			return ops.ShowText(b, ops.Shown{Vhost: "/", Queue: "q", Type: "classic"})
		},
		"show-empty.json": func(b *bytes.Buffer) error {
			return ops.ShowJSON(b, ops.Shown{Vhost: "/", Queue: "q", Type: "classic"})
		},
		"results.txt":       func(b *bytes.Buffer) error { return ops.ResultsText(b, results()) },
		"results.json":      func(b *bytes.Buffer) error { return ops.ResultsJSON(b, results()) },
		"results-one.txt":   func(b *bytes.Buffer) error { return ops.ResultsText(b, results()[:1]) },
		"results-none.json": func(b *bytes.Buffer) error { return ops.ResultsJSON(b, nil) },
		"replay.txt":        func(b *bytes.Buffer) error { return ops.ResultsText(b, replayed()) },
		"replay.json":       func(b *bytes.Buffer) error { return ops.ResultsJSON(b, replayed()) },
	} {
		var b bytes.Buffer
		if err := write(&b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		golden.Assert(t, filepath.Join("testdata", "view", name), b.Bytes())
	}
}

// TestDLQDryRunLine: a dry run says what would move, in one plain
// clause, not "moved 0 ... (3 would move (dry run))".
func TestDLQDryRunLine(t *testing.T) {
	var b bytes.Buffer
	r := ops.Result{Queue: "sms.send.dlq", Target: "sms.send", Depth: 4, Scanned: 4, Left: 4,
		LeftBy: map[string]int{ops.NoteWouldMove: 3, "filter": 1}}
	if err := ops.ResultsText(&b, []ops.Result{r}); err != nil {
		t.Fatal(err)
	}
	want := "sms.send.dlq -> sms.send: dry run: would move 3, left 1, failed 0 (1 filter)\n"
	if b.String() != want {
		t.Errorf("got  %q\nwant %q", b.String(), want)
	}
}
