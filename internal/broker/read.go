package broker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/definitions"
	"github.com/rmqtopo/rmqtopo/topology"
)

// LockQueue is the exclusive queue that an apply declares in every vhost it
// changes, on a connection held for the whole apply.
const LockQueue = contract.LockQueue

// Read reads the given vhosts concurrently: per vhost one GET
// /api/definitions/{vhost} and one GET of its ownership record. A vhost
// that does not exist is not an error: it is missing from the topology.
// Message and consumer counts are not read; see QueueCounts.
func (c *Client) Read(ctx context.Context, vhosts []string) (*topology.State, error) {
	vhosts = uniqueSorted(vhosts)
	st := topology.NewState(vhosts)
	type part struct {
		t          topology.Topology
		owned      []topology.Address
		terr, oerr error
	}
	parts := make([]part, len(vhosts))
	var wg sync.WaitGroup
	for i, v := range vhosts {
		wg.Add(2)
		go func() {
			defer wg.Done()
			parts[i].t, parts[i].terr = c.ReadVhost(ctx, v)
		}()
		go func() {
			defer wg.Done()
			parts[i].owned, parts[i].oerr = c.Owned(ctx, v)
		}()
	}
	wg.Wait()
	for _, p := range parts {
		if p.terr != nil {
			return nil, p.terr
		}
		if p.oerr != nil {
			return nil, p.oerr
		}
		st.Topology.Vhosts = append(st.Topology.Vhosts, p.t.Vhosts...)
		st.Topology.Exchanges = append(st.Topology.Exchanges, p.t.Exchanges...)
		st.Topology.Queues = append(st.Topology.Queues, p.t.Queues...)
		st.Topology.Bindings = append(st.Topology.Bindings, p.t.Bindings...)
		st.Topology.Policies = append(st.Topology.Policies, p.t.Policies...)
		for _, a := range p.owned {
			st.Owned[a] = true
		}
	}
	st.Topology.Sort()
	return st, nil
}

// ReadVhost reads one vhost's topology with GET /api/definitions/{vhost}.
// A vhost that does not exist gives an empty topology without the vhost.
func (c *Client) ReadVhost(ctx context.Context, vhost string) (topology.Topology, error) {
	var data []byte
	err := c.do(ctx, http.MethodGet, "/api/definitions/"+esc(vhost), nil, nil, &data)
	if errors.Is(err, ErrVhostNotFound) || errors.Is(err, ErrNotFound) {
		return topology.Topology{}, nil
	}
	if err != nil {
		return topology.Topology{}, fmt.Errorf("read vhost %q: %w", vhost, err)
	}
	doc, err := definitions.Decode(data, vhost)
	if err != nil {
		return topology.Topology{}, fmt.Errorf("read vhost %q: %w", vhost, err)
	}
	t := definitions.Clean(doc.ToTopology(vhost))
	// A single-vhost export has no "vhosts" list: the answer itself says
	// the vhost exists.
	t.Vhosts = []string{vhost}
	return t, nil
}

// pageSize is the largest page the management API serves.
const pageSize = 500

// maxFilterBytes bounds the name filter of one queue listing, well below
// the broker's 8000-byte request line limit.
const maxFilterBytes = 3000

// MessageCounts reads the message counts of the named queues in vhost (all
// queues when names is nil); see QueueCounts.
func (c *Client) MessageCounts(ctx context.Context, vhost string, names []string) (map[string]int64, error) {
	qc, err := c.QueueCounts(ctx, vhost, names)
	if err != nil {
		return nil, err
	}
	counts := make(map[string]int64, len(qc))
	for n, q := range qc {
		counts[n] = q.Messages
	}
	return counts, nil
}

// QueueCount is what the broker's statistics say about one queue.
type QueueCount struct {
	Messages int64
	// Consumers is nil when the broker did not report it.
	Consumers *int64
}

// QueueCounts reads the message and consumer counts of the named queues in
// vhost (all queues when names is nil) from the management API's paginated
// queue listing, with a name filter so that the broker only reports on
// those queues. Counts are the broker's statistics, refreshed every few
// seconds; a queue whose message count is not ready yet has no entry.
func (c *Client) QueueCounts(ctx context.Context, vhost string, names []string) (map[string]QueueCount, error) {
	counts := map[string]QueueCount{}
	var filters []string
	if names == nil {
		filters = []string{""}
	} else {
		filters = nameFilters(names)
	}
	for _, f := range filters {
		q := url.Values{"page_size": {strconv.Itoa(pageSize)}, "columns": {"name,messages,consumers"}}
		if f != "" {
			q.Set("name", f)
			q.Set("use_regex", "true")
		}
		for page := 1; ; page++ {
			q.Set("page", strconv.Itoa(page))
			var resp struct {
				PageCount int `json:"page_count"`
				Items     []struct {
					Name      string `json:"name"`
					Messages  *int64 `json:"messages"`
					Consumers *int64 `json:"consumers"`
				} `json:"items"`
			}
			err := c.do(ctx, http.MethodGet, "/api/queues/"+esc(vhost), q, nil, &resp)
			if errors.Is(err, ErrNotFound) || errors.Is(err, ErrVhostNotFound) {
				return counts, nil
			}
			if err != nil {
				return nil, fmt.Errorf("read message counts in vhost %q: %w", vhost, err)
			}
			for _, it := range resp.Items {
				if it.Messages != nil {
					counts[it.Name] = QueueCount{Messages: *it.Messages, Consumers: it.Consumers}
				}
			}
			if page >= resp.PageCount {
				break
			}
		}
	}
	if names != nil {
		want := map[string]bool{}
		for _, n := range names {
			want[n] = true
		}
		for n := range counts {
			if !want[n] {
				delete(counts, n)
			}
		}
	}
	return counts, nil
}

// nameFilters builds anchored alternations of quoted names, split so that
// each stays a short query parameter.
func nameFilters(names []string) []string {
	var out []string
	var cur []string
	size := 0
	for _, n := range uniqueSorted(names) {
		q := regexp.QuoteMeta(n)
		if size+len(q) > maxFilterBytes && len(cur) > 0 {
			out = append(out, "^("+strings.Join(cur, "|")+")$")
			cur, size = nil, 0
		}
		cur = append(cur, q)
		size += len(q) + 1
	}
	if len(cur) > 0 {
		out = append(out, "^("+strings.Join(cur, "|")+")$")
	}
	return out
}

func uniqueSorted(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}
