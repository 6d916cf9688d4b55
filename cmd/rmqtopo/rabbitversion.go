package main

import (
	"fmt"
	"strings"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

// rabbitVersionFlag is --rabbitmq-version, for plans made without a broker to
// ask (--against) or to judge a plan for the version a broker is about to
// be upgraded to.
type rabbitVersionFlag struct {
	RabbitMQVersion string `name:"rabbitmq-version" placeholder:"X.Y[.Z]" help:"Judge the plan for this RabbitMQ version (default: the broker's, from /api/overview; none with --against)."`
}

// version is the flag's version, else the state's, else the live
// broker's (client may be nil); unknown when none says.
func (f rabbitVersionFlag) version(e *env, st *topology.State, client *broker.Client) (topology.Version, error) {
	switch {
	case f.RabbitMQVersion != "":
		v, err := topology.ParseVersion(f.RabbitMQVersion)
		if err != nil {
			return v, fmt.Errorf("--rabbitmq-version: %w", err)
		}
		return v, nil
	case st != nil && st.BrokerVersion != "":
		if v, err := topology.ParseVersion(st.BrokerVersion); err == nil {
			return v, nil
		}
	case client != nil:
		// The version only adds diagnostics: a broker that will not say
		// (a user without access to /api/overview) still gets its plan.
		v, err := client.Version(e.ctx)
		if err != nil {
			fmt.Fprintf(e.stderr, "warning: %v; the checks that depend on the RabbitMQ version are skipped (give --rabbitmq-version)\n", err)
		}
		return v, nil
	}
	return topology.Version{}, nil
}

// withVersion adds the version diagnostics of p to diags.
func (f rabbitVersionFlag) withVersion(e *env, p plan.Plan, diags []plan.Diagnostic, st *topology.State, client *broker.Client) ([]plan.Diagnostic, error) {
	v, err := f.version(e, st, client)
	if err != nil {
		return nil, err
	}
	return append(diags, plan.CheckVersion(p, v)...), nil
}

// versionRefusals is the error for the diagnostics of a version that
// would refuse part of the plan, or nil; no flag accepts them, since the
// broker would refuse the write anyway.
func versionRefusals(cmd string, ds []plan.Diagnostic) error {
	var codes []string
	n := 0
	for _, d := range ds {
		if d.Severity == plan.SeverityError && (d.Code == plan.CodeRefusedArgument || d.Code == plan.CodeTransientQueue) {
			n++
			if !strings.Contains(strings.Join(codes, ","), d.Code) {
				codes = append(codes, d.Code)
			}
		}
	}
	if n == 0 {
		return nil
	}
	return fmt.Errorf("%s: the broker's RabbitMQ version refuses %d queue declaration(s) of this plan (%s); change the spec: nothing was written", cmd, n, strings.Join(codes, ", "))
}
