package broker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
const LockQueue = "rmqtopo.lock"

// State is what a read found in some vhosts.
type State struct {
	// Vhosts are the vhosts read, sorted; those that do not exist are
	// absent from Topology.Vhosts.
	Vhosts []string
	// Topology is the live topology, normalised like a desired one and
	// without what clients create for themselves (see Clean).
	Topology topology.Topology
	// Owned holds the objects rmqtopo recorded as its own in these vhosts.
	Owned map[topology.Address]bool
	// Messages holds the message counts read, by queue address; a queue
	// absent here has an unknown count.
	Messages map[topology.Address]int64
	// Consumers holds the consumer counts read with Messages, by queue
	// address; a queue absent here has an unknown count.
	Consumers map[topology.Address]int64
}

// Read reads the given vhosts concurrently: per vhost one GET
// /api/definitions/{vhost} and one GET of its ownership record. A vhost
// that does not exist is not an error: it is missing from the topology.
// Message and consumer counts are not read; see QueueCounts.
func (c *Client) Read(ctx context.Context, vhosts []string) (*State, error) {
	vhosts = uniqueSorted(vhosts)
	st := &State{Vhosts: vhosts, Owned: map[topology.Address]bool{}, Messages: map[topology.Address]int64{},
		Consumers: map[topology.Address]int64{}}
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
	t := Clean(doc.ToTopology(vhost))
	// A single-vhost export has no "vhosts" list: the answer itself says
	// the vhost exists.
	t.Vhosts = []string{vhost}
	return t, nil
}

// Clean drops from a live topology what clients create for themselves and
// rmqtopo must neither plan around nor fingerprint: server-named queues
// (amq.gen-*, never declarable by name), the apply lock queue, and the
// bindings to them. Exclusive queues are already absent from definitions.
func Clean(t topology.Topology) topology.Topology {
	dropped := map[topology.Address]bool{}
	queues := t.Queues[:0:0]
	for _, q := range t.Queues {
		if topology.Reserved(q.Name) || q.Name == LockQueue {
			dropped[q.Addr()] = true
			continue
		}
		queues = append(queues, q)
	}
	t.Queues = queues
	bindings := t.Bindings[:0:0]
	for _, b := range t.Bindings {
		if b.DestinationType == topology.DestQueue && dropped[topology.Address{Kind: topology.KindQueue, Vhost: b.Vhost, Name: b.Destination}] {
			continue
		}
		bindings = append(bindings, b)
	}
	t.Bindings = bindings
	return t
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

var (
	perAttemptWait = regexp.MustCompile(`^.+\.wait\.\d+\.\d+(ms|s|m|h)$`)
	outboxDelay    = regexp.MustCompile(`^.+\.delay_\d+s$`)
	springWait     = regexp.MustCompile(`^wait-queue-\d+(ms|s|m|h)$`)
)

// IsWaitQueueName recognises the names rmqtopo generates for wait queues:
// shared (rmqtopo.wait.<delay>), per-attempt (<queue>.wait.<n>.<delay>),
// and those of the outbox (<queue>.delay_<n>s) and spring
// (wait-queue-<delay>) presets. A retired wait queue is kept until it has
// drained; see plan.Options.IsWaitQueue.
func IsWaitQueueName(name string) bool {
	return strings.HasPrefix(name, contract.SharedWaitQueuePrefix) ||
		perAttemptWait.MatchString(name) || outboxDelay.MatchString(name) || springWait.MatchString(name)
}

// Fingerprint identifies the state a plan was made from: the live topology
// and the ownership record of its vhosts. Message counts are left out
// because they change all the time; apply re-reads them for every change
// that could destroy messages.
func (st *State) Fingerprint() string {
	owned := make([]topology.Address, 0, len(st.Owned))
	for a, ok := range st.Owned {
		if ok {
			owned = append(owned, a)
		}
	}
	sort.Slice(owned, func(i, j int) bool {
		if owned[i].Kind != owned[j].Kind {
			return owned[i].Kind < owned[j].Kind
		}
		return owned[i].Less(owned[j])
	})
	t := st.Topology
	t.Sort()
	b, err := json.Marshal(struct {
		Vhosts   []string           `json:"vhosts"`
		Topology topology.Topology  `json:"topology"`
		Owned    []topology.Address `json:"owned"`
	}{st.Vhosts, t, owned})
	if err != nil {
		// Only unencodable argument values fail, and those cannot come
		// from a broker's JSON.
		panic(fmt.Sprintf("broker: fingerprint: %v", err))
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
