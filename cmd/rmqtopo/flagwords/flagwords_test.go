package flagwords

import (
	"testing"

	"github.com/rmqtopo/rmqtopo/plan"
)

// Wording moves the remedy into the message once: wording again adds
// nothing, and a diagnostic without a remedy keeps its message.
func TestDiagnosticsWordsOnce(t *testing.T) {
	ds := []plan.Diagnostic{
		{Message: "deleting it destroys 1 message", Remedy: plan.Remedy{AllowDestroy: true}},
		{Message: "plain"},
	}
	Diagnostics(Diagnostics(ds))
	if ds[0].Message != "deleting it destroys 1 message; re-run with --allow-destroy to accept" || ds[1].Message != "plain" {
		t.Errorf("got %q, %q", ds[0].Message, ds[1].Message)
	}
}
