package apply

import "testing"

func TestProgressNewer(t *testing.T) {
	late := Progress{Step: "exchange", Done: 8999}
	if late.Newer(Progress{Step: "queue", Done: 9000}) || !(Progress{Step: StepPlanning}).Newer(late) {
		t.Error("Newer keeps a late report, or drops planning again")
	}
}
