package ops

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func viewShown() Shown {
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	long := bytes.Repeat([]byte("x"), bodyPreview+10)
	return Shown{Vhost: "shop", Queue: "orders.dlq", Type: "quorum", ReadIsDelivery: true, Depth: 3, Messages: []Message{
		{Position: 1, MessageID: "m1", Timestamp: &at, ContentType: "application/json", Reason: "rejected", ReasonSource: "header",
			Attempt: intp(3), Deaths: 2, FirstFailure: "2026-11-25T09:00:00Z", LastError: "boom",
			OriginalExchange: "shop", OriginalRoutingKey: "order.created", ReplayCount: 1, Size: 11, Body: `{"id": 42}`, BodyEncoding: "text"},
		{Position: 2, AttemptRaw: "three", DeathsUnreadable: "not a list", OriginalExchange: "", OriginalRoutingKey: "orders",
			ReplayCount: 2, Size: len(long), Body: string(long), BodyEncoding: "text"},
	}}
}

func viewResults() []Result {
	return []Result{
		{Queue: "a.dlq", Target: "a.parking-lot", Depth: 5, Scanned: 5, Moved: 3, Left: 2, LeftBy: map[string]int{NoteUnreadable: 1, "below threshold": 1}},
		{Queue: "b.dlq", Target: "b.parking-lot", Depth: 2, Scanned: 1, Moved: 0, Failed: 1, Stopped: "interrupted", Warnings: []string{"w"}},
	}
}

// The views of dlq show, replay and sweep, as text and JSON.
func TestViews(t *testing.T) {
	for name, write := range map[string]func(*bytes.Buffer) error{
		"show.txt":          func(b *bytes.Buffer) error { return viewShown().WriteText(b) },
		"show.json":         func(b *bytes.Buffer) error { return viewShown().WriteJSON(b) },
		"show-empty.json":   func(b *bytes.Buffer) error { return Shown{Vhost: "/", Queue: "q", Type: "classic"}.WriteJSON(b) },
		"results.txt":       func(b *bytes.Buffer) error { return WriteResults(b, false, viewResults()) },
		"results.json":      func(b *bytes.Buffer) error { return WriteResults(b, true, viewResults()) },
		"results-one.txt":   func(b *bytes.Buffer) error { return WriteResults(b, false, viewResults()[:1]) },
		"results-none.json": func(b *bytes.Buffer) error { return WriteResults(b, true, nil) },
	} {
		var b bytes.Buffer
		if err := write(&b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		golden(t, name, b.Bytes())
	}
}

// MovesError: the passes' errors on one line, else the messages that
// could not be moved, else none.
func TestMovesError(t *testing.T) {
	for _, tt := range []struct {
		results []Result
		err     error
		want    string
	}{
		{[]Result{{Moved: 3}}, nil, ""},
		{[]Result{{Failed: 1}}, nil, "1 message could not be moved and stayed where they were"},
		{[]Result{{Failed: 1}, {Failed: 2}}, nil, "3 messages could not be moved and stayed where they were"},
		{[]Result{{Failed: 1}}, errors.Join(errors.New("a.dlq: gone"), errors.New("b.dlq: gone")), "a.dlq: gone; b.dlq: gone"},
	} {
		got := ""
		if err := MovesError(tt.results, tt.err); err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("MovesError(%v, %v) = %q, want %q", tt.results, tt.err, got, tt.want)
		}
	}
}
