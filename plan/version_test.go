package plan

import (
	stdflag "flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/topology"
)

var updateVersion = stdflag.Bool("update-version", false, "rewrite testdata/version/*.txt (review the diff!)")

// versionFixture has one of everything the version checks look at: a
// quorum work queue with an explicit limit, a raw quorum queue without
// one, a lazy classic queue, a version-1 classic queue, a transient queue
// and a wait queue.
func versionFixture() topology.Topology {
	q := func(name string, durable bool, args topology.Args) topology.Queue {
		return topology.Queue{Vhost: "v", Name: name, Durable: durable, Arguments: args}
	}
	t := topology.Topology{Vhosts: []string{"v"}, Queues: []topology.Queue{
		q("work", true, topology.Args{"x-queue-type": "quorum", "x-delivery-limit": int64(20)}),
		q("votes", true, topology.Args{"x-queue-type": "quorum"}),
		q("lazy", true, topology.Args{"x-queue-mode": "lazy"}),
		q("v1", true, topology.Args{"x-queue-version": int64(1)}),
		q("v2", true, topology.Args{"x-queue-version": int64(2)}),
		q("scratch", false, nil),
		q("rmqtopo.wait.5s", true, topology.Args{"x-queue-type": "quorum", "x-delivery-limit": int64(20), "x-message-ttl": int64(5000)}),
	}}
	t.Sort()
	return t
}

// TestCheckVersionGolden pins the version diagnostics of one plan on
// RabbitMQ 3.10, 3.13, 4.0 and 4.3.
func TestCheckVersionGolden(t *testing.T) {
	p := DiffTopology(topology.Topology{}, versionFixture(), Options{})
	for _, ver := range []string{"3.10.8", "3.13.7", "4.0.5", "4.3.0"} {
		t.Run(ver, func(t *testing.T) {
			v, err := topology.ParseVersion(ver)
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			for _, d := range checkVersion(p, topology.Facts{Version: v}, nil) {
				fmt.Fprintf(&b, "%s %s %s: %s\n", d.Code, d.Severity, d.Address, d.Message)
			}
			path := filepath.Join("testdata", "version", ver+".txt")
			if *updateVersion {
				os.WriteFile(path, []byte(b.String()), 0o644)
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update-version)", err)
			}
			if diff := cmp.Diff(string(want), b.String()); diff != "" {
				t.Errorf("%s (-want +got):\n%s", path, diff)
			}
		})
	}
}

// TestCheckVersionOnlyJudgesWhatIsDeclared: on 4.3 a queue that already
// exists unchanged is not declared again, so it is not refused.
func TestCheckVersionOnlyJudgesWhatIsDeclared(t *testing.T) {
	desired := versionFixture()
	p := DiffTopology(desired, desired, Options{})
	for _, d := range checkVersion(p, topology.Facts{Version: topology.Version{Major: 4, Minor: 3}}, nil) {
		if d.Severity == SeverityError {
			t.Errorf("unchanged queue refused: %s", d.Message)
		}
	}
	// Nor is the x-death note repeated on a plan that sets up no retries.
	for _, d := range checkVersion(p, topology.Facts{Version: topology.Version{Major: 4, Minor: 0, Patch: 5}}, nil) {
		if d.Code == CodeClientDeathIgnored {
			t.Errorf("%s on a plan that declares no wait queue: %s", d.Code, d.Message)
		}
	}
	if ds := checkVersion(p, topology.Facts{}, nil); ds != nil {
		t.Errorf("unknown version gave %v", ds)
	}
}

// TestQueueModeOn43OneFinding: a live 4.3.6 accepts x-queue-mode and
// ignores it (release-notes/4.3.0.md said refused): one finding, RT105,
// not also RT011 by the precheck.
func TestQueueModeOn43OneFinding(t *testing.T) {
	p := Plan{Changes: []Change{{Action: Create, Address: topology.Address{Kind: topology.KindQueue, Vhost: "v", Name: "lazy"},
		After: &Object{Queue: &topology.Queue{Vhost: "v", Name: "lazy", Durable: true,
			Arguments: topology.Args{"x-queue-mode": "lazy", "x-queue-type": "classic"}}}}}}
	var codes []string
	v, err := topology.ParseVersion("4.3.6")
	if err != nil {
		t.Fatal(err)
	}
	x := topology.Facts{Version: v}
	for _, d := range append(precheck(p, nil, x), checkVersion(p, x, nil)...) {
		codes = append(codes, d.Code)
	}
	if want := []string{CodeQueueModeIgnored}; !slices.Equal(codes, want) {
		t.Errorf("codes = %v, want %v", codes, want)
	}
}
