package ops

import (
	"fmt"
	"math"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
)

// Death is one entry of a message's x-death header: the broker dead-lettered
// it Count times from Queue for Reason.
type Death struct {
	Queue       string    `json:"queue"`
	Reason      string    `json:"reason"`
	Exchange    string    `json:"exchange"`
	RoutingKeys []string  `json:"routing_keys,omitempty"`
	Count       int64     `json:"count"`
	Time        time.Time `json:"time,omitzero"`
}

// Deaths is what a message's x-death header says, read defensively.
type Deaths struct {
	// Count is the sum of count over every entry, whatever queue it names:
	// how many times the broker dead-lettered the message anywhere.
	Count int64
	// Entries are the entries, most recent first as the broker keeps them.
	Entries []Death
	// Problem is set when the header is present but unreadable; Count is
	// then 0 and Entries nil, so nothing acts on half a header.
	Problem string
}

// ReadDeaths reads the x-death header of headers. An absent header is zero
// deaths. Anything else that is not an array of tables, each with a
// non-negative integer count, is unreadable: x-death can be copied and
// rewritten by any client on the way, so it is data to check, not to trust.
func ReadDeaths(headers amqp.Table) Deaths {
	raw, ok := headers["x-death"]
	if !ok || raw == nil {
		return Deaths{}
	}
	list, ok := raw.([]any)
	if !ok {
		return Deaths{Problem: fmt.Sprintf("x-death is %s, not an array", typeName(raw))}
	}
	var d Deaths
	for i, e := range list {
		table, ok := asTable(e)
		if !ok {
			return Deaths{Problem: fmt.Sprintf("x-death entry %d is %s, not a table", i+1, typeName(e))}
		}
		c, present := table["count"]
		if !present {
			return Deaths{Problem: fmt.Sprintf("x-death entry %d has no count", i+1)}
		}
		n, ok := contract.Integer(c)
		if !ok {
			return Deaths{Problem: fmt.Sprintf("x-death entry %d has count %s, not an integer", i+1, typeName(c))}
		}
		if n < 0 {
			return Deaths{Problem: fmt.Sprintf("x-death entry %d has a negative count %d", i+1, n)}
		}
		if d.Count > math.MaxInt64-n {
			return Deaths{Problem: "x-death counts overflow"}
		}
		d.Count += n
		entry := Death{Count: n}
		entry.Queue, _ = table["queue"].(string)
		entry.Reason, _ = table["reason"].(string)
		entry.Exchange, _ = table["exchange"].(string)
		entry.Time, _ = table["time"].(time.Time)
		if keys, ok := table["routing-keys"].([]any); ok {
			for _, k := range keys {
				if s, ok := k.(string); ok {
					entry.RoutingKeys = append(entry.RoutingKeys, s)
				}
			}
		}
		d.Entries = append(d.Entries, entry)
	}
	return d
}

// DeathCount is how many times a message died: by the broker's record
// (x-death, see ReadDeaths) and by rmqtopo's own. The retry helper
// dead-letters by republishing, with contract.HeaderDeadLetterReason or,
// for an attempt past the schedule, through the retry exchange's alternate
// exchange, and it strips x-death when it does; a replay strips x-death
// too and counts itself in contract.HeaderReplayCount. So x-death alone
// finds nothing on rmqtopo's DLQs.
type DeathCount struct {
	// Broker is the sum of the x-death counts.
	Broker int64 `json:"broker"`
	// Rmqtopo is the replays the message went through (each followed a
	// death), plus one when it sits where the helper dead-lettered it.
	Rmqtopo int64 `json:"rmqtopo"`
	// Problem is set when x-death is present but unreadable.
	Problem string `json:"problem,omitempty"`
}

// Total is every death the headers record.
func (c DeathCount) Total() int64 {
	if c.Broker > math.MaxInt64-c.Rmqtopo {
		return math.MaxInt64
	}
	return c.Broker + c.Rmqtopo
}

// CountDeaths counts the deaths of d, delivered from queue.
func CountDeaths(d *amqp.Delivery, queue string) DeathCount {
	x := ReadDeaths(d.Headers)
	c := DeathCount{Broker: x.Count, Problem: x.Problem}
	c.Rmqtopo, _ = parseCount(d.Headers[contract.HeaderReplayCount])
	if helperDeadLettered(d, queue) && c.Rmqtopo < math.MaxInt64 {
		c.Rmqtopo++
	}
	return c
}

// helperDeadLettered reports whether d is a dead letter of the retry
// helper: it carries a dead-letter reason, or it was published to the
// retry exchange of the work queue its routing key names (a retry) and
// sits in another queue than that one, where only the retry exchange's
// alternate exchange, the DLQ's, can have put it. An immediate retry also
// comes through the retry exchange, but sits in the work queue itself.
func helperDeadLettered(d *amqp.Delivery, queue string) bool {
	if r, _ := HeaderString(d.Headers[contract.HeaderDeadLetterReason]); r != "" {
		return true
	}
	_, attempt := d.Headers[contract.HeaderAttempt]
	return attempt && d.Exchange == contract.RetryExchange(d.RoutingKey) && queue != d.RoutingKey
}

func asTable(v any) (map[string]any, bool) {
	switch t := v.(type) {
	case amqp.Table:
		return t, true
	case map[string]any:
		return t, true
	}
	return nil, false
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case []byte:
		return "a byte array"
	case bool:
		return "a boolean"
	case float32, float64:
		return "a float"
	case amqp.Decimal:
		return "a decimal"
	case time.Time:
		return "a timestamp"
	case []any:
		return "an array"
	case amqp.Table, map[string]any:
		return "a table"
	}
	if _, ok := contract.Integer(v); ok {
		return "an integer"
	}
	return fmt.Sprintf("a %T", v)
}
