package main

// rabbitVersionFlag is --rabbitmq-version, for plans made without a broker to
// ask (--against) or to judge a plan for the version a broker is about to
// be upgraded to.
type rabbitVersionFlag struct {
	RabbitMQVersion string `name:"rabbitmq-version" placeholder:"X.Y[.Z]" help:"Judge every check of the plan for this RabbitMQ version (default: the broker's, from /api/overview, or with --against the export's rabbit_version)."`
}
