package plan_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

// fakeBroker answers Review's two questions and counts them.
type fakeBroker struct {
	version        topology.Version
	versionErr     error
	access         topology.Access
	versions, accs int
}

func (f *fakeBroker) Version(context.Context) (topology.Version, error) {
	f.versions++
	return f.version, f.versionErr
}

func (f *fakeBroker) Access(context.Context, []string) (topology.Access, error) {
	f.accs++
	return f.access, nil
}

// TestReviewJudgesByOneVersion: the flag's version wins over the state's,
// the state's over the broker's, and the broker is asked only when neither
// said; a broker that will not say gives a warning, not an error.
func TestReviewJudgesByOneVersion(t *testing.T) {
	desired := topology.Topology{Vhosts: []string{"v"}, Queues: []topology.Queue{vq("q", nil)}}
	cases := []struct {
		name, flag, stateVersion string
		broker                   *fakeBroker
		want                     plan.Judged
		asked                    int
		warns                    bool
	}{
		{name: "flag", flag: "4.0", stateVersion: "3.10.8", broker: &fakeBroker{}, want: plan.Judged{Version: "4.0.0", From: "flag"}},
		{name: "state", stateVersion: "3.10.8", broker: &fakeBroker{}, want: plan.Judged{Version: "3.10.8", From: "broker"}},
		{name: "broker", broker: &fakeBroker{version: topology.Version{Major: 3, Minor: 13, Patch: 1}}, want: plan.Judged{Version: "3.13.1", From: "broker"}, asked: 1},
		{name: "broker will not say", broker: &fakeBroker{versionErr: errors.New("403 Forbidden")}, want: plan.Judged{From: "none"}, asked: 1, warns: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := &topology.State{BrokerVersion: c.stateVersion}
			p := plan.DiffTopology(st.Topology, desired, plan.Options{})
			_, warning, err := plan.Review(context.Background(), &p, st, plan.ReviewOptions{RabbitMQVersion: c.flag, From: "broker", Broker: c.broker})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, *p.RabbitMQ); diff != "" {
				t.Errorf("judged (-want +got):\n%s", diff)
			}
			if c.broker.versions != c.asked || (warning != nil) != c.warns {
				t.Errorf("broker asked %d times, warning %v; want %d times, warning %v", c.broker.versions, warning, c.asked, c.warns)
			}
		})
	}
}

// TestReviewChecksTheWritersAccess: only a review for a write, with
// changes, reads the user's access, and a user without permissions in
// the vhost gets RT012.
func TestReviewChecksTheWritersAccess(t *testing.T) {
	st := &topology.State{BrokerVersion: "3.10.8", Topology: topology.Topology{Vhosts: []string{"v"}}}
	desired := topology.Topology{Vhosts: []string{"v"}, Queues: []topology.Queue{vq("q", nil)}}
	for _, writer := range []bool{false, true} {
		b := &fakeBroker{access: topology.Access{User: "reader", Permissions: map[string]topology.Permission{}}}
		p := plan.DiffTopology(st.Topology, desired, plan.Options{})
		diags, _, err := plan.Review(context.Background(), &p, st, plan.ReviewOptions{From: "broker", Broker: b, Writer: writer})
		if err != nil {
			t.Fatal(err)
		}
		refused := false
		for _, d := range diags {
			refused = refused || d.Code == plan.CodeAccess
		}
		if b.accs != map[bool]int{false: 0, true: 1}[writer] || refused != writer {
			t.Errorf("writer %v: access read %d times, RT012 %v", writer, b.accs, refused)
		}
	}
}
