package importer_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/spec"
)

// TestImportRecognisesNative: queues of the native layout, on either
// settle route, one with its DLQ under another name, import as the spec they came from, every one recognised.
func TestImportRecognisesNative(t *testing.T) {
	want := mustParse(t, `version: 1
vhost: v
layout: native
queues:
  - {name: lin, type: quorum, retry: {linear: {step: 2s, attempts: 3}}}
  - {name: exp, type: quorum, retry: {exponential: {initial: 1s, factor: 2, attempts: 4, jitter: full}}}
  - {name: imm, type: quorum, immediate_retries: 1, retry: {delays: [5s]}, message_ttl: 1h}
  - {name: named, type: quorum, dlq_name: named.failed, retry: {delays: [2s]}}
`)
	res := mustImport(t, "v", want)
	if res.Recognised != 4 || len(res.Skipped) != 0 {
		t.Errorf("recognised %d, skipped %v, want 4 and none:\n%s", res.Recognised, res.Skipped, res.YAML)
	}
	if diff := cmp.Diff(want, spec.Expand(res.File)); diff != "" {
		t.Errorf("the imported spec expands (-native +got):\n%s\n%s", diff, res.YAML)
	}
}
