package broker

import (
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/topology"
)

// AMQPTable converts topology arguments for amqp091, which takes nested
// tables only as amqp.Table. Tests that declare topologies over AMQP use it
// too, so they send exactly what apply sends.
func AMQPTable(a topology.Args) amqp.Table {
	if len(a) == 0 {
		return nil
	}
	t := make(amqp.Table, len(a))
	for k, v := range a {
		t[k] = tableValue(v)
	}
	return t
}

func tableValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return AMQPTable(x)
	case topology.Args:
		return AMQPTable(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = tableValue(e)
		}
		return out
	}
	return v
}
