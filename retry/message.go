package retry

import (
	"strings"
	"time"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
)

// republishing returns the message of d to publish again, for a retry or
// to the DLQ: the same body and properties, every header except the
// broker's dead-lettering bookkeeping, and the contract's failure headers.
//
// Two properties are dropped. Expiration: a wait queue's own TTL must set
// the delay (a shorter per-message TTL would bring the message back early,
// and RabbitMQ itself drops expiration when it dead-letters). UserId: the
// broker checks it against the publishing connection's user, and the
// helper, not the original publisher, publishes now; a foreign UserId
// would make the broker close the channel on every attempt.
func republishing(d *amqp.Delivery, cause error, now time.Time) amqp.Publishing {
	h := make(amqp.Table, len(d.Headers)+5)
	for k, v := range d.Headers {
		if !contract.DeathHeaders(k) {
			h[k] = v
		}
	}
	// A native queue's message keeps its first failure in an annotation,
	// which a delivery shows as a header (see firstFailureToAdd); the
	// copy carries it as the contract's header.
	if s, ok := h[contract.AnnotationFirstFailure].(string); ok && validTime(s) {
		if c, ok := h[contract.HeaderFirstFailure].(string); !ok || !validTime(c) {
			h[contract.HeaderFirstFailure] = s
		}
	}
	delete(h, contract.AnnotationFirstFailure)
	if s, ok := h[contract.HeaderFirstFailure].(string); !ok || !validTime(s) {
		h[contract.HeaderFirstFailure] = now.UTC().Format(time.RFC3339Nano)
	}
	h[contract.HeaderLastError] = errorText(cause)
	if _, ok := h[contract.HeaderOriginalExchange].(string); !ok {
		h[contract.HeaderOriginalExchange] = d.Exchange
	}
	if _, ok := h[contract.HeaderOriginalRoutingKey].(string); !ok {
		h[contract.HeaderOriginalRoutingKey] = d.RoutingKey
	}
	return amqp.Publishing{
		Headers:         h,
		ContentType:     d.ContentType,
		ContentEncoding: d.ContentEncoding,
		DeliveryMode:    d.DeliveryMode,
		Priority:        d.Priority,
		CorrelationId:   d.CorrelationId,
		ReplyTo:         d.ReplyTo,
		MessageId:       d.MessageId,
		Timestamp:       d.Timestamp,
		Type:            d.Type,
		AppId:           d.AppId,
		Body:            d.Body,
	}
}

// firstFailureToAdd is the contract.AnnotationFirstFailure a failed
// delivery of a native queue returned by the modified outcome gets: now,
// on its first failure; empty when it carries one already (the broker
// keeps it on the message).
func firstFailureToAdd(d amqp.Delivery, now time.Time) string {
	if s, ok := d.Headers[contract.AnnotationFirstFailure].(string); ok && validTime(s) {
		return ""
	}
	return now.UTC().Format(time.RFC3339Nano)
}

func validTime(s string) bool {
	_, err := time.Parse(time.RFC3339Nano, s)
	return err == nil
}

// errorText renders cause for HeaderLastError, at most
// contract.MaxErrorBytes of valid UTF-8.
func errorText(cause error) string {
	if cause == nil {
		return "retry requested"
	}
	return truncateUTF8(cause.Error(), contract.MaxErrorBytes)
}

// truncateUTF8 returns s cut to at most limit bytes, on a rune boundary,
// with invalid UTF-8 replaced so the header is always readable text. A cut
// text ends in "…" (counted in limit).
func truncateUTF8(s string, limit int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= limit {
		return s
	}
	const ellipsis = "…"
	if limit < len(ellipsis) {
		return s[:runeStart(s, limit)]
	}
	return s[:runeStart(s, limit-len(ellipsis))] + ellipsis
}

// runeStart returns the largest rune boundary of s at or before i.
func runeStart(s string, i int) int {
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}
