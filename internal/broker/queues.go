package broker

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// QueueInfo is one queue as the management API lists it, with the counts
// and rates of its statistics (which lag by the stats interval, several
// seconds), its arguments and the policy definitions in effect on it.
type QueueInfo struct {
	Name        string  `json:"name"`
	Type        string  `json:"type"` // "classic" when the broker does not say
	Messages    int64   `json:"messages"`
	Ready       int64   `json:"messages_ready"`
	Unacked     int64   `json:"messages_unacknowledged"`
	Consumers   int64   `json:"consumers"`
	PublishRate float64 `json:"publish_rate"`
	DeliverRate float64 `json:"deliver_rate"`
	// DeadLettered is messages_dlx, which quorum queues report: messages
	// dead-lettered with the at-least-once strategy that their target has
	// not confirmed yet. Nil when the broker does not report it (classic
	// queues).
	DeadLettered *int64 `json:"messages_dlx,omitempty"`
	// Delayed is messages_delayed, which quorum queues report from
	// RabbitMQ 4.3: returned deliveries the queue's delayed retry
	// (x-delayed-retry-type) holds back until their delay is over. Nil
	// when the broker does not report it (before 4.3, classic queues).
	Delayed *int64 `json:"messages_delayed,omitempty"`
	// LastDelayedAt is last_delayed_at, which quorum queues report with
	// Delayed: when the last retry held back comes due, in Unix
	// milliseconds. Nil when none is held or the broker does not say.
	LastDelayedAt *int64 `json:"last_delayed_at,omitempty"`
	Arguments     map[string]any
	PolicyLimits  map[string]any // effective_policy_definition
}

// DeadLettersHeld returns the messages the queue holds only until their
// dead-letter target confirms them: the broker's own messages_dlx where it
// reports one, else the messages counted but neither ready nor delivered.
// On 3.10.8 the two were equal for a held quorum wait queue.
func (q QueueInfo) DeadLettersHeld() int64 {
	if q.DeadLettered != nil {
		return *q.DeadLettered
	}
	return max(q.Messages-q.Ready-q.Unacked, 0)
}

// DeliveryLimits returns the delivery limits given to the queue, its
// x-delivery-limit argument's and its policy's, as given: what they make
// depends on the broker's version (a negative one is no limit from 4.0,
// and drops a message at its first requeue on 3.x), which the caller
// judges.
func (q QueueInfo) DeliveryLimits() []int64 {
	var limits []int64
	for _, v := range []any{q.Arguments["x-delivery-limit"], q.PolicyLimits["delivery-limit"]} {
		if n, ok := jsonInt(v); ok {
			limits = append(limits, n)
		}
	}
	return limits
}

// jsonInt reads an integer the management API may send as a JSON number
// or, from a policy or argument set by hand, as a string.
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

// queueColumns are the columns QueueInfo holds: the broker sends nothing
// else, which keeps a listing of thousands of queues small.
const queueColumns = "name,type,messages,messages_ready,messages_unacknowledged,messages_dlx,messages_delayed,last_delayed_at,consumers," +
	"message_stats.publish_details.rate,message_stats.deliver_get_details.rate," +
	"arguments,effective_policy_definition"

// apiQueue is a queue as the management API sends it.
type apiQueue struct {
	Name         string         `json:"name"`
	Type         string         `json:"type"`
	Messages     int64          `json:"messages"`
	Ready        int64          `json:"messages_ready"`
	Unacked      int64          `json:"messages_unacknowledged"`
	Consumers    int64          `json:"consumers"`
	DeadLettered *int64         `json:"messages_dlx"`
	Delayed      *int64         `json:"messages_delayed"`
	LastDelayed  *int64         `json:"last_delayed_at"`
	Arguments    map[string]any `json:"arguments"`
	Policy       map[string]any `json:"effective_policy_definition"`
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
		DeadLettered: a.DeadLettered, Delayed: a.Delayed, LastDelayedAt: a.LastDelayed, Arguments: a.Arguments, PolicyLimits: a.Policy,
	}
}

// ListQueues lists every queue of vhost with its counts and rates, a page
// of 500 at a time: one request per 500 queues, never one per queue. A
// missing vhost is ErrNotFound or ErrVhostNotFound.
func (c *Client) ListQueues(ctx context.Context, vhost string) ([]QueueInfo, error) {
	var out []QueueInfo
	q := url.Values{"page_size": {strconv.Itoa(pageSize)}, "columns": {queueColumns}}
	for page := 1; ; page++ {
		q.Set("page", strconv.Itoa(page))
		var doc struct {
			Items     listing[apiQueue] `json:"items"`
			PageCount int               `json:"page_count"`
		}
		if err := c.do(ctx, http.MethodGet, "/api/queues/"+esc(vhost), q, nil, &doc); err != nil {
			return nil, fmt.Errorf("listing the queues of vhost %q: %w", vhost, err)
		}
		for _, it := range doc.Items {
			out = append(out, it.info())
		}
		if page >= doc.PageCount {
			return out, nil
		}
	}
}

// GetQueue reads one queue; a missing one is ErrNotFound.
func (c *Client) GetQueue(ctx context.Context, vhost, name string) (QueueInfo, error) {
	var q apiQueue
	path := "/api/queues/" + esc(vhost) + "/" + esc(name)
	if err := c.do(ctx, http.MethodGet, path, url.Values{"columns": {queueColumns}}, nil, &q); err != nil {
		return QueueInfo{}, fmt.Errorf("reading queue %q in vhost %q: %w", name, vhost, err)
	}
	return q.info(), nil
}
