package ops

import (
	"errors"
	"testing"
)

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
