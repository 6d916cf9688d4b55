package ops

import (
	"encoding/base64"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
)

// Reasons Decode gives when no header names one.
const (
	ReasonRetriesExhausted = "retries exhausted"
	ReasonUnknown          = "unknown"
)

// Decode reads a delivery as a Message.
func Decode(position int, d *amqp.Delivery) Message {
	h := d.Headers
	m := Message{
		Position:      position,
		MessageID:     d.MessageId,
		CorrelationID: d.CorrelationId,
		ContentType:   d.ContentType,
		Exchange:      d.Exchange,
		RoutingKey:    d.RoutingKey,
		Redelivered:   d.Redelivered,
		Size:          len(d.Body),
		Headers:       jsonTable(h),
	}
	if !d.Timestamp.IsZero() {
		ts := d.Timestamp.UTC()
		m.Timestamp = &ts
	}
	if n, ok := contract.Integer(h["x-delivery-count"]); ok {
		m.DeliveryCount = &n
	}
	if utf8.Valid(d.Body) {
		m.Body, m.BodyEncoding = string(d.Body), "utf-8"
	} else {
		m.Body, m.BodyEncoding = base64.StdEncoding.EncodeToString(d.Body), "base64"
	}

	deaths := ReadDeaths(h)
	m.Deaths, m.DeathsUnreadable = deaths.Count, deaths.Problem

	decodeAttempt(&m, h)
	decodeReason(&m, h, deaths)
	decodeFirstFailure(&m, h, deaths)
	m.LastError, _ = HeaderString(h[contract.HeaderLastError])
	m.OriginalExchange, m.OriginalRoutingKey = OriginalRoute(d)
	if n, ok := parseCount(h[contract.HeaderReplayCount]); ok {
		m.ReplayCount = n
	}
	return m
}

// decodeAttempt sets m's attempt from the contract's attempt header: the
// number when it parses, else the header as text (or its type's name).
func decodeAttempt(m *Message, h amqp.Table) {
	if raw, ok := h[contract.HeaderAttempt]; ok {
		if n, ok := contract.ParseAttempt(raw); ok {
			m.Attempt = &n
		} else {
			m.AttemptRaw, _ = HeaderString(raw)
			if m.AttemptRaw == "" {
				m.AttemptRaw = typeName(raw)
			}
		}
	}
}

// decodeReason sets why m was dead-lettered and where that came from: the
// reason header, else the latest death, else an attempt header (retries
// exhausted), else unknown.
func decodeReason(m *Message, h amqp.Table, deaths Deaths) {
	switch r, _ := HeaderString(h[contract.HeaderDeadLetterReason]); {
	case r != "":
		m.Reason, m.ReasonSource = r, "header"
	case len(deaths.Entries) > 0 && deaths.Entries[0].Reason != "":
		// The broker keeps the most recent death first.
		m.Reason, m.ReasonSource = deaths.Entries[0].Reason, "x-death"
	case h[contract.HeaderAttempt] != nil:
		// A topology applied by an earlier rmqtopo dead-letters an attempt
		// past the schedule through the retry exchange's alternate exchange,
		// without any reason header (the helper now sets "exhausted").
		m.Reason, m.ReasonSource = ReasonRetriesExhausted, "attempt"
	default:
		m.Reason = ReasonUnknown
	}
}

// decodeFirstFailure sets when m first failed: the first-failure header,
// else the earliest death's time.
func decodeFirstFailure(m *Message, h amqp.Table, deaths Deaths) {
	m.FirstFailure, _ = HeaderString(h[contract.HeaderFirstFailure])
	if m.FirstFailure == "" {
		var first time.Time
		for _, e := range deaths.Entries {
			if !e.Time.IsZero() && (first.IsZero() || e.Time.Before(first)) {
				first = e.Time
			}
		}
		if !first.IsZero() {
			m.FirstFailure = first.UTC().Format(time.RFC3339)
		}
	}
}

// OriginalRoute returns where a message was first published: the contract's
// headers, else the broker's record of its first death, else the delivery's
// own exchange and routing key.
func OriginalRoute(d *amqp.Delivery) (exchange, routingKey string) {
	h := d.Headers
	exchange, okE := HeaderString(h[contract.HeaderOriginalExchange])
	routingKey, okK := HeaderString(h[contract.HeaderOriginalRoutingKey])
	if okE && okK {
		return exchange, routingKey
	}
	deaths := ReadDeaths(h)
	if !okE {
		if e, ok := HeaderString(h["x-first-death-exchange"]); ok {
			exchange, okE = e, true
		} else if n := len(deaths.Entries); n > 0 {
			exchange, okE = deaths.Entries[n-1].Exchange, true
		} else {
			exchange = d.Exchange
		}
	}
	if !okK {
		if n := len(deaths.Entries); n > 0 && len(deaths.Entries[n-1].RoutingKeys) > 0 {
			routingKey = deaths.Entries[n-1].RoutingKeys[0]
		} else {
			routingKey = d.RoutingKey
		}
	}
	return exchange, routingKey
}

// HeaderString renders a scalar header value the way a filter compares it:
// strings and byte arrays as they are, integers in decimal, booleans as
// true/false, timestamps in RFC 3339. ok is false for tables, arrays and
// absent headers, which no filter value matches.
func HeaderString(v any) (s string, ok bool) {
	switch x := v.(type) {
	case nil:
		return "", false
	case string:
		return x, true
	case []byte:
		return string(x), true
	case bool:
		return strconv.FormatBool(x), true
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32), true
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), true
	case time.Time:
		return x.UTC().Format(time.RFC3339), true
	case amqp.Decimal:
		return decimalString(x), true
	}
	if n, ok := contract.Integer(v); ok {
		return strconv.FormatInt(n, 10), true
	}
	return "", false
}

func decimalString(d amqp.Decimal) string {
	r := new(big.Rat).SetFrac(big.NewInt(int64(d.Value)), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d.Scale)), nil))
	return r.FloatString(int(d.Scale))
}

// parseCount reads a counter header written as a decimal string (the
// contract's convention) or as an integer.
func parseCount(v any) (int64, bool) {
	if n, ok := contract.Integer(v); ok && n >= 0 {
		return n, true
	}
	s, ok := HeaderString(v)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// jsonTable converts AMQP header values into values encoding/json renders
// faithfully: timestamps as RFC 3339, byte arrays as text, decimals as
// strings, nested tables and arrays recursively.
func jsonTable(t amqp.Table) map[string]any {
	if len(t) == 0 {
		return nil
	}
	out := make(map[string]any, len(t))
	for k, v := range t {
		out[k] = jsonValue(v)
	}
	return out
}

func jsonValue(v any) any {
	switch x := v.(type) {
	case amqp.Table:
		return jsonTable(x)
	case map[string]any:
		return jsonTable(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValue(e)
		}
		return out
	case []byte:
		if utf8.Valid(x) {
			return string(x)
		}
		return base64.StdEncoding.EncodeToString(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339)
	case amqp.Decimal:
		return decimalString(x)
	}
	return v
}
