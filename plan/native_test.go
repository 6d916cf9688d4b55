package plan

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/topology"
)

// TestNativeRefusedBelow431: a queue of the native layout, on either
// settle route, is refused (RT106, with the version) by every release
// below 4.3.1 before any write, and accepted from 4.3.1; a queue with
// malformed delayed-retry arguments is RT011's, not a native queue.
func TestNativeRefusedBelow431(t *testing.T) {
	native := func(name string, delays ...time.Duration) Change {
		args := topology.Args{"x-queue-type": "quorum"}
		for k, v := range contract.NativeArguments(delays, false) {
			args[k] = v
		}
		q := topology.Queue{Vhost: "v", Name: name, Durable: true, Arguments: topology.NormalizeArgs(args)}
		return Change{Action: Create, Address: q.Addr(), After: &Object{Queue: &q}}
	}
	p := Plan{Changes: []Change{native("linear", time.Second, 2*time.Second), native("exp", time.Second, 4*time.Second)}}
	for _, c := range []struct {
		version string
		refused bool
	}{{"3.10.8", true}, {"4.0.5", true}, {"4.3.0", true}, {"4.3.1", false}, {"4.3.6", false}, {"", false}} {
		p.RabbitMQ = &Judged{Version: c.version}
		ds := Check(p, CheckOptions{})
		var got []string
		for _, d := range ds {
			if d.Code == CodeNativeNeedsVersion {
				got = append(got, d.Address.Name)
				if d.Severity != SeverityError || !strings.Contains(d.Message, c.version) || !strings.Contains(d.Message, "4.3.1") {
					t.Errorf("%s: %+v; want an error naming both versions", c.version, d)
				}
			}
		}
		if want := []string{"linear", "exp"}; c.refused != slices.Equal(got, want) || !c.refused && len(got) > 0 {
			t.Errorf("%s: RT106 for %v, want refused %v", c.version, got, c.refused)
		}
		if c.refused && len(Refusals(Blocking(ds))) == 0 {
			t.Errorf("%s: RT106 is not a refusal no flag accepts", c.version)
		}
	}
}

// TestLayoutKeptNoted: each kept queue is one info line.
func TestLayoutKeptNoted(t *testing.T) {
	a := topology.Address{Kind: topology.KindQueue, Vhost: "v", Name: "q"}
	ds := Check(Plan{}, CheckOptions{Kept: []LayoutKept{{Address: a, Move: "move it so"}}})
	if len(ds) != 1 || ds[0].Code != CodeLayoutKept || ds[0].Severity != SeverityInfo || ds[0].Message != "move it so" || ds[0].Address != a {
		t.Errorf("got %+v", ds)
	}
}
