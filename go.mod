module github.com/rmqtopo/rmqtopo

go 1.25

require (
	github.com/alecthomas/kong v1.17.0
	github.com/google/go-cmp v0.7.0
	github.com/michaelklishin/rabbit-hole/v2 v2.12.0
	github.com/rabbitmq/amqp091-go v1.16.0
	github.com/rogpeppe/go-internal v1.16.0
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	golang.org/x/term v0.30.0
	gopkg.in/yaml.v3 v3.0.1
)

require (
	golang.org/x/sys v0.31.0 // indirect
	golang.org/x/text v0.14.0 // indirect
	golang.org/x/tools v0.26.0 // indirect
)
