package plan

import (
	"context"
	"fmt"

	"github.com/rmqtopo/rmqtopo/topology"
)

// Broker is what Review asks a live broker beyond the state a plan was made
// from. Both calls only read.
type Broker interface {
	// Version is the broker's RabbitMQ version (GET /api/overview).
	Version(ctx context.Context) (topology.Version, error)
	// Access is what the connecting user may do in vhosts.
	Access(ctx context.Context, vhosts []string) (topology.Access, error)
}

// ReviewOptions are Review's inputs beside the plan and its state.
type ReviewOptions struct {
	Check CheckOptions
	// RabbitMQVersion overrides the version the plan is judged for
	// (--rabbitmq-version); empty takes the state's, then Broker's.
	RabbitMQVersion string
	// From says where the state came from, for the plan's header:
	// "broker" or "export".
	From string
	// Broker is the live broker the plan was read from; nil for a plan
	// against an export or nothing.
	Broker Broker
	// Writer is set when the plan is about to be applied: Review then
	// also checks the access of the user who writes (RT012). A plan alone
	// does not, since a read-only user may plan for another to apply.
	Writer bool
}

// Review judges p, made from st, by one RabbitMQ version (recorded in
// p.RabbitMQ) and runs every check on it: the diagnostics plan shows and
// apply refuses by, the same for both. warning is set, and the checks that
// depend on the version are skipped, when the broker would not say its
// version (a user without access to /api/overview still gets a plan).
func Review(ctx context.Context, p *Plan, st *topology.State, o ReviewOptions) (diags []Diagnostic, warning, err error) {
	j, err := JudgeVersion(o.RabbitMQVersion, st, o.From)
	if err != nil {
		return nil, nil, err
	}
	if j.Version == "" && o.Broker != nil {
		v, verr := o.Broker.Version(ctx)
		if verr != nil {
			warning = fmt.Errorf("%w; the checks that depend on the RabbitMQ version are skipped", verr)
		} else {
			j = Judged{Version: v.String(), From: o.From}
		}
	}
	p.RabbitMQ = &j
	opts := o.Check
	opts.State = st
	if o.Writer && o.Broker != nil && p.HasChanges() {
		access, err := o.Broker.Access(ctx, st.Vhosts)
		if err != nil {
			return nil, warning, err
		}
		opts.Access = &access
	}
	return Check(*p, opts), warning, nil
}
