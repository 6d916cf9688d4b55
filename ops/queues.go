package ops

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// API is the management HTTP API as ops uses it: GETs of JSON documents.
// The CLI adapts its management client to it; tests use a plain client.
type API interface {
	// GetJSON GETs path (escaped, with its query, e.g.
	// "/api/queues/%2F?page=1") and decodes the JSON answer into out.
	GetJSON(ctx context.Context, path string, out any) error
}

// QueueInfo is what the management API reports about one queue.
type QueueInfo struct {
	Name         string  `json:"name"`
	Type         string  `json:"type"`
	Messages     int64   `json:"messages"`
	Ready        int64   `json:"messages_ready"`
	Unacked      int64   `json:"messages_unacknowledged"`
	Consumers    int64   `json:"consumers"`
	PublishRate  float64 `json:"publish_rate"`
	DeliverRate  float64 `json:"deliver_rate"`
	Arguments    map[string]any
	PolicyLimits map[string]any // effective_policy_definitions
}

// DeliveryLimit returns the queue's delivery limit, the lower of its
// x-delivery-limit argument and its policy's delivery-limit, or 0 for none.
func (q QueueInfo) DeliveryLimit() int64 {
	var limit int64
	for _, v := range []any{q.Arguments["x-delivery-limit"], q.PolicyLimits["delivery-limit"]} {
		n, ok := jsonInt(v)
		if ok && n >= 0 && (limit == 0 || n < limit) {
			limit = n
		}
	}
	return limit
}

// MinDeliveryLimit is the lowest delivery limit of a quorum queue that ops
// leaves messages in. Every message a pass leaves in place is requeued,
// which counts one delivery; past its limit a quorum queue dead-letters or
// drops the message. rmqtopo's own DLQs set 1,000,000.
const MinDeliveryLimit = 1000

// CheckLeaveSafe refuses a quorum queue whose delivery limit could make
// requeues lose messages. brokerMajor is the broker's major version: since
// 4.0 a quorum queue without a limit has one of 20.
func CheckLeaveSafe(q QueueInfo, brokerMajor int) error {
	if q.Type != "quorum" {
		return nil
	}
	limit := q.DeliveryLimit()
	if limit == 0 && brokerMajor >= 4 {
		limit = 20
	}
	if limit == 0 || limit >= MinDeliveryLimit {
		return nil
	}
	return fmt.Errorf("queue %q is a quorum queue with a delivery limit of %d: every message rmqtopo reads and leaves in place counts one delivery, and past the limit the broker dead-letters or drops it; raise it to at least %d (a policy with delivery-limit) first",
		q.Name, limit, MinDeliveryLimit)
}

// queueColumns are the columns ops reads; the management API sends nothing else.
const queueColumns = "name,type,messages,messages_ready,messages_unacknowledged,consumers," +
	"message_stats.publish_details.rate,message_stats.deliver_get_details.rate," +
	"arguments,effective_policy_definitions"

// PageSize is the management API's largest page.
const PageSize = 500

type apiQueue struct {
	Name         string         `json:"name"`
	Type         string         `json:"type"`
	Messages     int64          `json:"messages"`
	Ready        int64          `json:"messages_ready"`
	Unacked      int64          `json:"messages_unacknowledged"`
	Consumers    int64          `json:"consumers"`
	Arguments    map[string]any `json:"arguments"`
	Policy       map[string]any `json:"effective_policy_definitions"`
	MessageStats struct {
		Publish    struct{ Rate float64 } `json:"publish_details"`
		DeliverGet struct{ Rate float64 } `json:"deliver_get_details"`
	} `json:"message_stats"`
}

func (a apiQueue) info() QueueInfo {
	typ := a.Type
	if typ == "" {
		typ = "classic"
	}
	return QueueInfo{
		Name: a.Name, Type: typ, Messages: a.Messages, Ready: a.Ready, Unacked: a.Unacked,
		Consumers: a.Consumers, PublishRate: a.MessageStats.Publish.Rate, DeliverRate: a.MessageStats.DeliverGet.Rate,
		Arguments: a.Arguments, PolicyLimits: a.Policy,
	}
}

// ListQueues lists every queue of vhost with its counts and rates, a page
// of PageSize at a time: one request per 500 queues, never one per queue.
func ListQueues(ctx context.Context, api API, vhost string) ([]QueueInfo, error) {
	var out []QueueInfo
	for page := 1; ; page++ {
		var doc struct {
			Items     []apiQueue `json:"items"`
			PageCount int        `json:"page_count"`
		}
		path := fmt.Sprintf("/api/queues/%s?page=%d&page_size=%d&columns=%s",
			url.PathEscape(vhost), page, PageSize, url.QueryEscape(queueColumns))
		if err := api.GetJSON(ctx, path, &doc); err != nil {
			return nil, fmt.Errorf("listing the queues of vhost %q: %w", vhost, err)
		}
		for _, q := range doc.Items {
			out = append(out, q.info())
		}
		if page >= doc.PageCount {
			return out, nil
		}
	}
}

// GetQueue reads one queue.
func GetQueue(ctx context.Context, api API, vhost, name string) (QueueInfo, error) {
	var q apiQueue
	path := fmt.Sprintf("/api/queues/%s/%s?columns=%s", url.PathEscape(vhost), url.PathEscape(name), url.QueryEscape(queueColumns))
	if err := api.GetJSON(ctx, path, &q); err != nil {
		return QueueInfo{}, fmt.Errorf("reading queue %q in vhost %q: %w", name, vhost, err)
	}
	return q.info(), nil
}

// BrokerMajor returns the broker's major version from /api/overview.
func BrokerMajor(ctx context.Context, api API) (int, error) {
	var o struct {
		Version string `json:"rabbitmq_version"`
	}
	if err := api.GetJSON(ctx, "/api/overview?columns=rabbitmq_version", &o); err != nil {
		return 0, fmt.Errorf("reading the broker version: %w", err)
	}
	major, _, _ := strings.Cut(o.Version, ".")
	n, err := strconv.Atoi(major)
	if err != nil {
		return 0, fmt.Errorf("unexpected broker version %q", o.Version)
	}
	return n, nil
}

func jsonInt(v any) (int64, bool) {
	switch x := v.(type) {
	case float64:
		if x == float64(int64(x)) {
			return int64(x), true
		}
	case int64:
		return x, true
	case int:
		return int64(x), true
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		return n, err == nil
	}
	return 0, false
}

// Glob reports whether name matches pattern, where * matches any run of
// characters (dots and slashes included) and ? any one character; every
// other character matches itself.
func Glob(pattern, name string) bool {
	p, n := []rune(pattern), []rune(name)
	// Iterative matching with backtracking to the last star: linear in
	// practice, never exponential.
	pi, ni, star, mark := 0, 0, -1, 0
	for ni < len(n) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == n[ni]):
			pi++
			ni++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, ni
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			ni = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}
