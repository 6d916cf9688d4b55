package main

import (
	"fmt"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

// rabbitVersionFlag is --rabbitmq-version, for plans made without a broker to
// ask (--against) or to judge a plan for the version a broker is about to
// be upgraded to.
type rabbitVersionFlag struct {
	RabbitMQVersion string `name:"rabbitmq-version" placeholder:"X.Y[.Z]" help:"Judge every check of the plan for this RabbitMQ version (default: the broker's, from /api/overview, or with --against the export's rabbit_version)."`
}

// judge is the one version every check of p judges by: the flag's, else
// the version st's source reported (from: "broker" or "export"), else the
// live broker's (client may be nil).
func (f rabbitVersionFlag) judge(e *env, st *topology.State, client *broker.Client, from string) (plan.Judged, error) {
	j, err := plan.JudgeVersion(f.RabbitMQVersion, st, from)
	if err != nil || j.Version != "" || client == nil {
		return j, err
	}
	// The version only adds diagnostics: a broker that will not say (a
	// user without access to /api/overview) still gets its plan.
	v, err := client.Version(e.ctx)
	if err != nil {
		fmt.Fprintf(e.stderr, "warning: %v; the checks that depend on the RabbitMQ version are skipped (give --rabbitmq-version)\n", err)
		return j, nil
	}
	return plan.Judged{Version: v.String(), From: from}, nil
}

// checkPlan judges p, made from st, by one version and runs every check
// on it: the diagnostics plan shows and apply refuses by, the same for
// both. Apply (writer) also checks the access of the user who writes
// (RT012); plan does not, since a read-only user may plan for another
// to apply.
func checkPlan(e *env, p *plan.Plan, st *topology.State, client *broker.Client, f rabbitVersionFlag, from string, opts plan.CheckOptions, writer bool) ([]plan.Diagnostic, error) {
	j, err := f.judge(e, st, client, from)
	if err != nil {
		return nil, err
	}
	p.RabbitMQ = &j
	opts.State = st
	if writer && client != nil && p.HasChanges() {
		access, err := client.Access(e.ctx, st.Vhosts)
		if err != nil {
			return nil, err
		}
		opts.Access = &access
	}
	return plan.Check(*p, opts), nil
}
