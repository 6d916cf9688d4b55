package importer_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/internal/shapetest"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

const shapesSpec = `version: 1
vhost: v
exchanges: [{name: in, type: topic}]
queues:
  - {name: a, type: quorum, retry: {delays: [1s, 5s]}, bindings: [{exchange: in}]}
  - {name: b, message_ttl: 1m, max_length: 100, retry: {delays: [5s]}}
  - {name: c, type: quorum, delivery_limit: 7, layout: per-attempt, retry: {delays: [1s]}}
  - {name: d, type: quorum, dlq_name: d.failed, retry: {delays: [2s]}}
`

// Import recognises both shapes rmqtopo's own layouts have had on a
// broker since they used policies: today's (dead-lettering as arguments,
// a policy for what the spec sets) and an earlier rmqtopo's (everything in
// each queue's policy). A DLQ under another name (dlq_name) is found
// behind the queue's DLX. Each imports as the same spec, every work queue
// recognised, nothing skipped.
func TestImportRecognisesEveryShape(t *testing.T) {
	want := mustParse(t, shapesSpec)
	for name, shape := range map[string]func(topology.Topology) topology.Topology{
		"today":     func(t topology.Topology) topology.Topology { return t },
		"per-queue": shapetest.Legacy,
	} {
		t.Run(name, func(t *testing.T) {
			live := shape(want)
			res := mustImport(t, "v", live)
			if res.Recognised != 4 || len(res.Skipped) != 0 {
				t.Errorf("recognised %d, skipped %v, want 4 and none:\n%s", res.Recognised, res.Skipped, res.YAML)
			}
			if diff := cmp.Diff(want, spec.Expand(res.File)); diff != "" {
				t.Errorf("the imported spec expands (-today's shape +got):\n%s\n%s", diff, res.YAML)
			}
		})
	}
}
