package broker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/rmqtopo/rmqtopo/internal/definitions"
	"github.com/rmqtopo/rmqtopo/rabbitmq"
	"github.com/rmqtopo/rmqtopo/topology"
)

// readsExport reports whether a read of a broker of version takes a
// vhost's definitions (queues, bindings and policies) from its export:
// where the release's profile says the export is its fastest read
// (rabbitmq.Profile.ExportReadFastest, from 4.3.0). On 4.3.6 the export of
// a vhost of 5,000 queues and 35,000 bindings takes 0.64 s, where the
// bindings listing alone takes 2.6-2.9 s; on 3.10.8 the export takes
// 3.1 s and the four listings together 1.2 s. docs/benchmarks.md has the
// figures, 4.0.5's too.
func readsExport(version string) bool {
	p, _ := rabbitmq.ProfileOf(version)
	return p.ExportReadFastest()
}

// vhostDoc reads vhost's definitions from a broker of version: from its
// export where that costs the broker less and the user may export (an
// administrator), else from its four listings (vhostListings).
func (c *Client) vhostDoc(ctx context.Context, vhost, version string) vhostDoc {
	if (readsExport(version) || c.forceExport) && !c.exportRefused.Load() {
		d, refused := c.vhostExport(ctx, vhost)
		if !refused {
			return d
		}
		// Not an administrator: this client lists from now on.
		c.exportRefused.Store(true)
	}
	return c.vhostListings(ctx, vhost)
}

// vhostExport builds vhost's definitions from GET /api/definitions/{vhost}
// and, made at once, the exchange listing: the export leaves out internal
// exchanges (seen on 4.3.6), and with them rmqtopo's ownership records.
// It also leaves out exclusive queues but not their bindings, which are
// dropped here, as vhostListings drops them. refused is true when the
// user may not export.
func (c *Client) vhostExport(ctx context.Context, vhost string) (d vhostDoc, refused bool) {
	var (
		export    definitions.Document
		exchanges []definitions.Exchange
	)
	errs := concurrently(func() error {
		var data []byte
		err := c.do(ctx, http.MethodGet, "/api/definitions/"+esc(vhost), nil, nil, &data)
		if err == nil {
			export, err = definitions.Decode(data, vhost)
		}
		if err != nil {
			return fmt.Errorf("export definitions: %w", err)
		}
		return nil
	}, func() error {
		return c.list(ctx, vhost, listingCall{"exchanges", exchangeColumns, &exchanges})
	})
	if errors.Is(errs[0], ErrAuth) || errors.Is(errs[0], ErrPermission) {
		return vhostDoc{}, true
	}
	for _, err := range errs {
		if errors.Is(err, ErrVhostNotFound) || errors.Is(err, ErrNotFound) {
			return vhostDoc{}, false
		}
	}
	if err := firstErr(errs); err != nil {
		return vhostDoc{err: fmt.Errorf("read vhost %q: %w", vhost, err)}, false
	}
	doc := definitions.Document{Exchanges: exchanges, Queues: export.Queues, Policies: export.Policies,
		Bindings: boundToListed(export.Queues, export.Bindings)}
	return vhostDoc{doc: doc, exists: true}, false
}

// boundToListed drops the bindings to queues that queues does not list:
// a binding's queue exists, so one the export left out is exclusive.
func boundToListed(queues []definitions.Queue, bindings []definitions.Binding) []definitions.Binding {
	listed := make(map[string]bool, len(queues))
	for _, q := range queues {
		listed[q.Name] = true
	}
	return slices.DeleteFunc(bindings, func(b definitions.Binding) bool {
		return b.DestinationType == topology.DestQueue && !listed[b.Destination]
	})
}
