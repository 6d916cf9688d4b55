package main

import (
	"fmt"

	"github.com/rmqtopo/rmqtopo/cmd/rmqtopo/flagwords"
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

// review runs plan.Review with client as the live broker (nil for none)
// and prints its warning.
func review(e *env, p *plan.Plan, st *topology.State, client *broker.Client, o plan.ReviewOptions) ([]plan.Diagnostic, error) {
	if client != nil {
		o.Broker = client
	}
	diags, warning, err := plan.Review(e.ctx, p, st, o)
	if warning != nil {
		// The only warning: the broker would not say its version.
		fmt.Fprintf(e.stderr, "warning: %v (give --rabbitmq-version)\n", warning)
	}
	return flagwords.Diagnostics(diags), err
}
