package broker

import (
	"context"
	"fmt"
	"net/http"

	"github.com/rmqtopo/rmqtopo/internal/definitions"
	"github.com/rmqtopo/rmqtopo/topology"
)

// PutRecord writes r, one spec's ownership record in r.Vhost, as the
// durable internal exchange r.ExchangeName() whose argument
// definitions.RecordArgument holds the record's JSON (see
// topology.RecordPrefix for why an exchange). Exchanges are immutable, so
// each write is a new generation: the new exchange is declared first and
// the two generations before it are deleted after, so that a kill in
// between leaves two records (the reader takes the newest), never none.
// It goes over HTTP: a record of 16,000 objects, about a megabyte, does
// not fit in one AMQP frame.
func (c *Client) PutRecord(ctx context.Context, r topology.Record) error {
	text, err := definitions.EncodeRecord(r)
	if err != nil {
		return fmt.Errorf("encode the ownership record of spec %q in vhost %q: %w", r.Spec, r.Vhost, err)
	}
	e := topology.Exchange{Vhost: r.Vhost, Name: r.ExchangeName(), Type: "fanout", Durable: true, Internal: true,
		Arguments: topology.Args{definitions.RecordArgument: text}}
	if err := c.DeclareExchange(ctx, e); err != nil {
		return fmt.Errorf("record ownership of spec %q in vhost %q (exchange %q): %w", r.Spec, r.Vhost, e.Name, err)
	}
	for g := r.Generation - 2; g < r.Generation; g++ {
		if g < 0 {
			continue
		}
		old := r
		old.Generation = g
		err := c.do(ctx, http.MethodDelete, "/api/exchanges/"+esc(r.Vhost)+"/"+esc(old.ExchangeName()), nil, nil, nil)
		if err = ignoreNotFound(err); err != nil {
			return fmt.Errorf("remove the superseded ownership record %q in vhost %q: %w", old.ExchangeName(), r.Vhost, err)
		}
	}
	return nil
}
