package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/definitions"
	"github.com/rmqtopo/rmqtopo/topology"
)

// LockQueue is the exclusive queue that an apply declares in every vhost it
// changes, on a connection held for the whole apply.
const LockQueue = contract.LockQueue

// Read reads the given vhosts concurrently, with every request at once:
// GET /api/overview, whose answer confirms first that the server is
// RabbitMQ (see Server), the vhosts' default queue types (one GET
// /api/vhosts), and, once the version is known, per vhost its definitions
// export and exchange listing, or its four listings (GET /api/exchanges,
// /api/queues, /api/bindings and /api/policies), whichever the release
// serves faster (see vhostDoc); the exchange listing includes rmqtopo's
// ownership records. A vhost that does not exist is not an error: it is
// missing from the topology. Message and consumer counts are not read;
// see Count.
func (c *Client) Read(ctx context.Context, vhosts []string) (*topology.State, error) {
	vhosts = uniqueSorted(vhosts)
	l, err := c.fetchListings(ctx, vhosts)
	if err != nil {
		return nil, err
	}
	parts := make([]vhostRead, len(vhosts))
	var wg sync.WaitGroup
	wg.Add(len(vhosts))
	for i, v := range vhosts {
		go func() {
			defer wg.Done()
			parts[i] = readVhost(v, l.defaults[v], l.docs[i])
		}()
	}
	wg.Wait()
	st := topology.NewState(vhosts)
	st.BrokerVersion = l.version
	st.Deprecated, st.Plugins = l.deprecated, l.plugins
	if err := mergeVhosts(st, vhosts, parts, l); err != nil {
		return nil, err
	}
	// Each vhost's part is sorted (ToTopology sorts), and vhosts come in
	// order: one vhost needs no second sort, costly at 16,000 objects.
	if len(parts) > 1 {
		st.Topology.Sort()
	}
	return st, nil
}

// listings are the broker's answers Read builds the state from.
type listings struct {
	version     string
	defaults    map[string]string // default queue type by vhost
	docs        []vhostDoc        // by vhost, in order
	operator    [][]topology.Policy
	operatorErr []error
	// The key table's facts; a failure to read them leaves them unknown,
	// which the plan says, rather than failing the read.
	deprecated map[string]string
	plugins    map[string]bool
}

// fetchListings makes every request of Read at once (the vhosts' reads
// once the overview answered), so that the plan costs about the largest
// of them, a vhost's read. The overview's
// answer is still judged first: a server that is not RabbitMQ gives that
// one error, whatever it answered to the others.
func (c *Client) fetchListings(ctx context.Context, vhosts []string) (listings, error) {
	l := listings{docs: make([]vhostDoc, len(vhosts)), operator: make([][]topology.Policy, len(vhosts)),
		operatorErr: make([]error, len(vhosts))}
	var (
		serverErr, listErr error
		wg                 sync.WaitGroup
	)
	wg.Add(4 + 2*len(vhosts))
	// The vhosts' reads wait for the version, which decides how they read
	// (vhostDoc); the rest go at once.
	versioned := make(chan struct{})
	go func() { defer wg.Done(); defer close(versioned); l.version, serverErr = c.Server(ctx) }()
	go func() { defer wg.Done(); l.deprecated, _ = c.deprecatedFeatures(ctx) }()
	go func() { defer wg.Done(); l.plugins, _ = c.enabledPlugins(ctx) }()
	go func() { defer wg.Done(); l.defaults, listErr = c.defaultQueueTypes(ctx) }()
	for i, v := range vhosts {
		go func() { defer wg.Done(); <-versioned; l.docs[i] = c.vhostDoc(ctx, v, l.version) }()
		go func() { defer wg.Done(); l.operator[i], l.operatorErr[i] = c.OperatorPolicies(ctx, v) }()
	}
	wg.Wait()
	if serverErr != nil {
		return listings{}, serverErr
	}
	return l, listErr
}

// mergeVhosts adds each vhost's part, in order, to st; the first error of
// a vhost, in order, fails it.
func mergeVhosts(st *topology.State, vhosts []string, parts []vhostRead, l listings) error {
	owned := 0
	for _, p := range parts {
		for _, r := range p.records {
			owned += len(r.Owned)
		}
	}
	st.Owned = make(map[topology.Address]bool, owned)
	for i, p := range parts {
		if p.err != nil {
			return p.err
		}
		if l.operatorErr[i] != nil {
			return l.operatorErr[i]
		}
		st.Topology.Vhosts = append(st.Topology.Vhosts, p.t.Vhosts...)
		st.Topology.Exchanges = append(st.Topology.Exchanges, p.t.Exchanges...)
		st.Topology.Queues = append(st.Topology.Queues, p.t.Queues...)
		st.Topology.Bindings = append(st.Topology.Bindings, p.t.Bindings...)
		st.Topology.Policies = append(st.Topology.Policies, p.t.Policies...)
		st.OperatorPolicies = append(st.OperatorPolicies, l.operator[i]...)
		st.Records = append(st.Records, p.records...)
		for _, r := range p.records {
			for a := range r.Owned {
				st.Owned[a] = true
			}
		}
		if p.defaultType != "" {
			st.DefaultQueueType[vhosts[i]] = p.defaultType
		}
	}
	return nil
}

// vhostRead is what Read learns about one vhost.
type vhostRead struct {
	t           topology.Topology
	records     []topology.Record
	defaultType string
	err         error
}

// readVhost turns one vhost's listings into its part of the state.
func readVhost(v, defaultType string, got vhostDoc) vhostRead {
	var r vhostRead
	doc := got.doc
	switch {
	case got.err != nil:
		r.err = got.err
		return r
	case !got.exists:
		return r
	}
	r.defaultType = defaultType
	// The records (a JSON text of about a megabyte at 16,000 objects) and
	// the topology are parsed at once, on the machine's other CPU.
	doc.Vhosts = []definitions.Vhost{{Name: v, TopDefaultQueueType: defaultType}}
	var recErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.records, recErr = doc.Records(v)
	}()
	r.t = definitions.Clean(doc.ToTopology(v))
	// The listings answered, so the vhost exists.
	r.t.Vhosts = []string{v}
	<-done
	if recErr != nil {
		return vhostRead{err: fmt.Errorf("read vhost %q: %w", v, recErr)}
	}
	return r
}

// defaultQueueTypes lists every vhost's default queue type in one call,
// which a monitoring user may make (GET /api/vhosts/{name} needs the
// administrator tag).
func (c *Client) defaultQueueTypes(ctx context.Context) (map[string]string, error) {
	var list listing[struct {
		Name             string `json:"name"`
		DefaultQueueType string `json:"default_queue_type"`
	}]
	// RabbitMQ 4.0.5 answered this listing with an empty HTTP 500 while
	// other clients created and deleted vhosts (twice in the suite): a
	// read, so it is asked again, three times in all.
	for try := 1; ; try++ {
		status, err := c.doStatus(ctx, http.MethodGet, "/api/vhosts", url.Values{"columns": {"name,default_queue_type"}}, nil, &list)
		if err == nil {
			break
		}
		if status != http.StatusInternalServerError || try == 3 {
			return nil, fmt.Errorf("list vhosts: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("list vhosts: %w", err)
		case <-time.After(time.Duration(try) * 200 * time.Millisecond):
		}
	}
	out := make(map[string]string, len(list))
	for _, v := range list {
		out[v.Name] = v.DefaultQueueType
	}
	return out, nil
}

// vhostDoc is one vhost's definitions as its listings gave them.
type vhostDoc struct {
	doc definitions.Document
	// exists is false for a vhost that does not exist.
	exists bool
	err    error
}

// exchangeColumns are the columns of a vhost's exchange listing: what a
// definition needs, every way a vhost is read.
const exchangeColumns = "name,vhost,type,durable,auto_delete,internal,arguments"

// listingCall is one of the four listings a vhost is read from.
type listingCall struct {
	what, columns string
	out           any
}

// vhostListings builds vhost's definitions from GET /api/exchanges,
// /api/queues, /api/bindings and /api/policies, made at once. Up to
// RabbitMQ 4.2 they cost the broker less than the vhost's definitions
// export (at 45,000 objects about 1-1.2 s together, against 3.1-5.2 s for
// the export on 3.10.8 and 4.0.5; see readsExport), and a user tagged
// monitoring, who may not export definitions, may read them. Exclusive
// queues are left out, as an export does.
func (c *Client) vhostListings(ctx context.Context, vhost string) vhostDoc {
	var (
		doc    definitions.Document
		queues []exclusiveQueue
	)
	calls := []listingCall{
		{"exchanges", exchangeColumns, &doc.Exchanges},
		{"queues", "name,vhost,durable,auto_delete,arguments,exclusive", &queues},
		{"bindings", "source,vhost,destination,destination_type,routing_key,arguments", &doc.Bindings},
		{"policies", "", &doc.Policies},
	}
	lists := make([]func() error, len(calls))
	for i, call := range calls {
		lists[i] = func() error { return c.list(ctx, vhost, call) }
	}
	errs := concurrently(lists...)
	for _, err := range errs {
		if errors.Is(err, ErrVhostNotFound) || errors.Is(err, ErrNotFound) {
			return vhostDoc{}
		}
	}
	if err := firstErr(errs); err != nil {
		return vhostDoc{err: fmt.Errorf("read vhost %q: %w", vhost, err)}
	}
	doc.Queues, doc.Bindings = leaveOutExclusive(queues, doc.Bindings)
	return vhostDoc{doc: doc, exists: true}
}

// exclusiveQueue is a queue as its listing gives it.
type exclusiveQueue struct {
	definitions.Queue
	Exclusive bool `json:"exclusive"`
}

// leaveOutExclusive drops exclusive queues and the bindings to them, as a
// definitions export does: they belong to one connection and go with it.
func leaveOutExclusive(queues []exclusiveQueue, bindings []definitions.Binding) ([]definitions.Queue, []definitions.Binding) {
	kept := make([]definitions.Queue, 0, len(queues))
	exclusive := map[string]bool{}
	for _, q := range queues {
		if q.Exclusive {
			exclusive[q.Name] = true
			continue
		}
		kept = append(kept, q.Queue)
	}
	if len(exclusive) == 0 {
		return kept, bindings
	}
	return kept, slices.DeleteFunc(bindings, func(b definitions.Binding) bool {
		return b.DestinationType == topology.DestQueue && exclusive[b.Destination]
	})
}

// list makes one of a vhost's listings and decodes it into call.out.
func (c *Client) list(ctx context.Context, vhost string, call listingCall) error {
	// An empty sort turns off the broker's own sort of the listing (by
	// name and more), which rmqtopo does not need: the topology is sorted
	// as it is built. At 35,000 bindings it saves the broker about a
	// quarter of the listing's time.
	q := url.Values{"sort": {""}}
	if call.columns != "" {
		q.Set("columns", call.columns)
		q.Set("disable_stats", "true")
	}
	var data []byte
	err := c.do(ctx, http.MethodGet, "/api/"+call.what+"/"+esc(vhost), q, nil, &data)
	if err == nil {
		err = decodeNumbers(data, call.out)
	}
	if err != nil {
		return fmt.Errorf("list %s: %w", call.what, err)
	}
	return nil
}

// concurrently runs fns at once and returns their errors, in order.
func concurrently(fns ...func() error) []error {
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	wg.Add(len(fns))
	for i, fn := range fns {
		go func() { defer wg.Done(); errs[i] = fn() }()
	}
	wg.Wait()
	return errs
}

// firstErr is the first error of errs that is not nil: one readable
// line, where the four listings usually fail for the same reason.
func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// decodeNumbers decodes JSON keeping numbers exact, as definitions.Decode
// does, so that a listing normalises like an export.
func decodeNumbers(data []byte, out any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return dec.Decode(out)
}

// ReadVhost reads one vhost's topology (see Read), without its records.
// A vhost that does not exist gives an empty topology without the vhost.
func (c *Client) ReadVhost(ctx context.Context, vhost string) (topology.Topology, error) {
	st, err := c.Read(ctx, []string{vhost})
	if err != nil {
		return topology.Topology{}, err
	}
	return st.Topology, nil
}

// pageSize is the largest page the management API serves.
const pageSize = 500

// maxFilterBytes bounds the name filter of one queue listing, well below
// the broker's 8000-byte request line limit.
const maxFilterBytes = 3000

// QueueCount is what the broker's statistics say about one queue.
type QueueCount struct {
	Messages int64
	// Consumers is nil when the broker did not report it.
	Consumers *int64
	// Reductions is the work the queue's process has done, which a quorum
	// queue reports with its counts at each tick: a new value means new
	// statistics (see freshTotals). Nil when the broker did not report it.
	Reductions *int64
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
		q := url.Values{"page_size": {strconv.Itoa(pageSize)}, "columns": {"name,messages,consumers,reductions"}}
		if f != "" {
			q.Set("name", f)
			q.Set("use_regex", "true")
		}
		for page := 1; ; page++ {
			q.Set("page", strconv.Itoa(page))
			var resp struct {
				PageCount int `json:"page_count"`
				Items     listing[struct {
					Name       string `json:"name"`
					Messages   *int64 `json:"messages"`
					Consumers  *int64 `json:"consumers"`
					Reductions *int64 `json:"reductions"`
				}] `json:"items"`
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
					counts[it.Name] = QueueCount{Messages: *it.Messages, Consumers: it.Consumers, Reductions: it.Reductions}
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
