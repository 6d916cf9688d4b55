package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"

	"github.com/rmqtopo/rmqtopo/topology"
)

// OwnedParameterPrefix starts the name of the global parameter that records
// the objects rmqtopo created in one vhost: "rmqtopo.owned.<vhost>".
//
// The record lives in the broker, not in a state file, so every copy of
// rmqtopo that talks to the broker sees the same ownership, and it survives
// as long as the broker's own definitions do. A global parameter rather
// than a vhost-scoped one because the management API accepts arbitrary
// values only there; it needs the administrator tag, as does reading
// definitions.
const OwnedParameterPrefix = "rmqtopo.owned."

// OwnedParameter names vhost's ownership record. Any vhost name works: the
// name is one escaped path segment.
func OwnedParameter(vhost string) string { return OwnedParameterPrefix + vhost }

// ownedFormatVersion versions the record's JSON.
const ownedFormatVersion = 1

// ownedRecord is the value of the global parameter. Names are grouped by
// kind and the vhost is stated once, which keeps a record of 16,000 objects
// under a megabyte.
type ownedRecord struct {
	FormatVersion int        `json:"format_version"`
	Vhost         string     `json:"vhost"`
	VhostCreated  bool       `json:"vhost_created,omitempty"`
	Exchanges     []string   `json:"exchanges"`
	Queues        []string   `json:"queues"`
	Policies      []string   `json:"policies"`
	Bindings      [][]string `json:"bindings"` // [name, key] of the binding's address
}

func encodeOwned(vhost string, owned []topology.Address) ownedRecord {
	r := ownedRecord{FormatVersion: ownedFormatVersion, Vhost: vhost,
		Exchanges: []string{}, Queues: []string{}, Policies: []string{}, Bindings: [][]string{}}
	sorted := append([]topology.Address(nil), owned...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Less(sorted[j]) })
	for _, a := range sorted {
		switch a.Kind {
		case topology.KindVhost:
			r.VhostCreated = a.Name == vhost
		case topology.KindExchange:
			r.Exchanges = append(r.Exchanges, a.Name)
		case topology.KindQueue:
			r.Queues = append(r.Queues, a.Name)
		case topology.KindPolicy:
			r.Policies = append(r.Policies, a.Name)
		case topology.KindBinding:
			r.Bindings = append(r.Bindings, []string{a.Name, a.Key})
		}
	}
	return r
}

func (r ownedRecord) addresses() ([]topology.Address, error) {
	if r.FormatVersion != ownedFormatVersion {
		return nil, fmt.Errorf("ownership record of vhost %q has format_version %d; this rmqtopo reads %d",
			r.Vhost, r.FormatVersion, ownedFormatVersion)
	}
	var out []topology.Address
	if r.VhostCreated {
		out = append(out, topology.Address{Kind: topology.KindVhost, Name: r.Vhost})
	}
	for _, n := range r.Exchanges {
		out = append(out, topology.Address{Kind: topology.KindExchange, Vhost: r.Vhost, Name: n})
	}
	for _, n := range r.Queues {
		out = append(out, topology.Address{Kind: topology.KindQueue, Vhost: r.Vhost, Name: n})
	}
	for _, n := range r.Policies {
		out = append(out, topology.Address{Kind: topology.KindPolicy, Vhost: r.Vhost, Name: n})
	}
	for _, b := range r.Bindings {
		if len(b) != 2 {
			return nil, fmt.Errorf("ownership record of vhost %q: malformed binding %q", r.Vhost, b)
		}
		out = append(out, topology.Address{Kind: topology.KindBinding, Vhost: r.Vhost, Name: b[0], Key: b[1]})
	}
	return out, nil
}

// Owned reads vhost's ownership record; none is an empty set.
func (c *Client) Owned(ctx context.Context, vhost string) ([]topology.Address, error) {
	var p struct {
		Value json.RawMessage `json:"value"`
	}
	err := c.do(ctx, http.MethodGet, "/api/global-parameters/"+esc(OwnedParameter(vhost)), nil, nil, &p)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read ownership record of vhost %q: %w", vhost, err)
	}
	var r ownedRecord
	if err := json.Unmarshal(p.Value, &r); err != nil {
		return nil, fmt.Errorf("ownership record of vhost %q (global parameter %q): %w", vhost, OwnedParameter(vhost), err)
	}
	r.Vhost = vhost
	return r.addresses()
}

// PutOwned replaces vhost's ownership record with owned (addresses in
// other vhosts are ignored). Writing the same record twice is harmless.
func (c *Client) PutOwned(ctx context.Context, vhost string, owned []topology.Address) error {
	var mine []topology.Address
	for _, a := range owned {
		if a.Vhost == vhost || (a.Kind == topology.KindVhost && a.Name == vhost) {
			mine = append(mine, a)
		}
	}
	name := OwnedParameter(vhost)
	body := map[string]any{"name": name, "value": encodeOwned(vhost, mine)}
	if err := c.do(ctx, http.MethodPut, "/api/global-parameters/"+esc(name), nil, body, nil); err != nil {
		return fmt.Errorf("record ownership in vhost %q: %w", vhost, err)
	}
	return nil
}

// DeleteOwned removes vhost's ownership record; a missing one is success.
func (c *Client) DeleteOwned(ctx context.Context, vhost string) error {
	return ignoreNotFound(c.do(ctx, http.MethodDelete, "/api/global-parameters/"+esc(OwnedParameter(vhost)), nil, nil, nil))
}
