package main

import (
	"fmt"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/spec"
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

// nativeFlags choose RabbitMQ 4.3's native delayed retry in renderings.
type nativeFlags struct {
	NativeDelayedRetry bool `name:"native-delayed-retry" help:"Render linear schedules of quorum queues as RabbitMQ 4.3 x-delayed-retry-* arguments instead of wait queues; needs --rabbitmq-version 4.3 or later."`
	// Render reads no broker: the version is the user's word alone.
	RabbitMQVersion string `name:"rabbitmq-version" placeholder:"X.Y[.Z]" help:"The RabbitMQ version to render for (render reads no broker); --native-delayed-retry needs 4.3 or later."`
}

// expander returns how to expand files for rendering: as always, or with
// native delayed retry, which it reports on stderr queue by queue.
func (f nativeFlags) expander(e *env, files []*spec.File) (func() topology.Topology, error) {
	plain := func() topology.Topology { return spec.Expand(files...) }
	if !f.NativeDelayedRetry {
		return plain, nil
	}
	j, err := plan.JudgeVersion(f.RabbitMQVersion, nil, "")
	if err != nil {
		return nil, err
	}
	v, _ := topology.ParseVersion(j.Version)
	if arg, _ := topology.LookupFeature(topology.FeatureQueueArgument, "x-delayed-retry-type", nil); !v.Known() || arg.At(v) != topology.Accepted {
		return nil, fmt.Errorf("render: --native-delayed-retry needs --rabbitmq-version %s or later (got %s): older brokers ignore x-delayed-retry-*", arg.Since, v)
	}
	return func() topology.Topology {
		t, converted := spec.NativeDelayedRetry(files, spec.Expand(files...))
		for _, q := range converted {
			fmt.Fprintf(e.stderr, "queue %q: native delayed retry (x-delayed-retry-*), no wait queues; its service must reject failed deliveries instead of republishing\n", q)
		}
		return t
	}, nil
}
