package topology

import "github.com/rmqtopo/rmqtopo/rabbitmq"

// Version is a RabbitMQ release. It is rabbitmq.Version, kept under this
// name for the model's many users: the type lives in package rabbitmq
// with the release profiles, which the runtime helper (retry) consults
// and which therefore sit below topology.
type Version = rabbitmq.Version

// ParseVersion reads "MAJOR.MINOR[.PATCH]"; see rabbitmq.ParseVersion.
func ParseVersion(s string) (Version, error) { return rabbitmq.ParseVersion(s) }
