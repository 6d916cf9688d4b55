package apply

import (
	"testing"
	"time"
)

func TestProgressLine(t *testing.T) {
	for _, tt := range []struct {
		p    Progress
		want string
	}{
		{Progress{}, "apply: reading the broker and planning (1s)"},
		{Progress{Step: StepRecords, Total: 16000}, "apply: 0/16000 changes, recording ownership (1s)"},
		{Progress{Step: "queue", Done: 9000, Total: 16000}, "apply: 9000/16000 changes, queue phase (1s)"},
	} {
		if got := tt.p.Line(1200 * time.Millisecond); got != tt.want {
			t.Errorf("%+v: got %q, want %q", tt.p, got, tt.want)
		}
	}
	late := Progress{Step: "exchange", Done: 8999}
	if late.Newer(Progress{Step: "queue", Done: 9000}) || !(Progress{Step: StepPlanning}).Newer(late) {
		t.Error("Newer keeps a late report, or drops planning again")
	}
}
