package importer

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/topology"
)

// builtinExchanges exist on every vhost; the broker declares them, so
// leaving them out of a spec loses nothing.
var builtinExchanges = map[string]bool{
	"amq.direct": true, "amq.fanout": true, "amq.topic": true, "amq.headers": true,
	"amq.match": true, "amq.rabbitmq.trace": true, "amq.rabbitmq.log": true,
}

// Extras lists the objects of vhost in a definitions document that a
// topology.Topology read from it leaves out, so that Import can say they
// were not imported: bindings of the built-in amq.* exchanges (rmqtopo
// reads no bindings of exchanges the broker owns), exchanges and queues
// with the reserved amq. prefix, and runtime parameters (operator
// policies, limits, federation, shovels). Users, permissions and global
// parameters are not a vhost's topology and are ignored. Entries without
// a vhost, as in a single-vhost export, belong to vhost.
func Extras(data []byte, vhost string) ([]Skipped, error) {
	var doc struct {
		Exchanges  []map[string]any `json:"exchanges"`
		Queues     []map[string]any `json:"queues"`
		Bindings   []map[string]any `json:"bindings"`
		Parameters []map[string]any `json:"parameters"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("decode definitions: %w", err)
	}
	in := func(o map[string]any) bool {
		v, ok := o["vhost"].(string)
		return !ok || v == "" || v == vhost
	}
	str := func(o map[string]any, k string) string { s, _ := o[k].(string); return s }
	var out []Skipped
	for _, e := range doc.Exchanges {
		if name := str(e, "name"); in(e) && topology.Reserved(name) && name != "" && !builtinExchanges[name] {
			a := topology.Address{Kind: topology.KindExchange, Vhost: vhost, Name: name}
			out = append(out, Skipped{Object: a.String(), Reason: "the prefix \"amq.\" is reserved by RabbitMQ"})
		}
	}
	for _, q := range doc.Queues {
		name := str(q, "name")
		if !in(q) || (!topology.Reserved(name) && name != contract.LockQueue) {
			continue
		}
		a := topology.Address{Kind: topology.KindQueue, Vhost: vhost, Name: name}
		why := "the prefix \"amq.\" is reserved for server-named queues, which clients declare for themselves"
		if name == contract.LockQueue {
			why = "rmqtopo's own apply lock"
		}
		out = append(out, Skipped{Object: a.String(), Reason: why})
	}
	for _, b := range doc.Bindings {
		if src := str(b, "source"); in(b) && topology.Reserved(src) && src != "" {
			a := topology.Binding{Vhost: vhost, Source: src, Destination: str(b, "destination"),
				DestinationType: str(b, "destination_type"), RoutingKey: str(b, "routing_key")}
			if args, ok := b["arguments"].(map[string]any); ok {
				a.Arguments = topology.NormalizeArgs(args)
			}
			out = append(out, Skipped{Object: a.Addr().String(),
				Reason: "a binding of a built-in amq.* exchange: rmqtopo neither reads nor plans them"})
		}
	}
	for _, p := range doc.Parameters {
		if in(p) {
			out = append(out, Skipped{Object: fmt.Sprintf("parameter %q of component %q in vhost %q", str(p, "name"), str(p, "component"), vhost),
				Reason: "runtime parameters (operator policies, limits, federation, shovels) are not part of a spec"})
		}
	}
	return out, nil
}
