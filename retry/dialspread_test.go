package retry_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/retry"
)

// TestDialURLsSpread checks that new dialers given the same node list do
// not all start at its first node: replicas of a service would then all
// sit on one node and all lose it at once. 64 dialers over two nodes all
// starting at one of them by chance is a 2^-63 event.
func TestDialURLsSpread(t *testing.T) {
	urls := []string{"amqp://127.0.0.1:1/", "amqp://127.0.0.1:2/"}
	first := map[string]int{}
	for range 64 {
		var dialed []string
		cfg := amqp.Config{Dial: func(_, addr string) (net.Conn, error) {
			dialed = append(dialed, addr)
			return nil, errors.New("no node here")
		}}
		// A guard: the fake dials fail at once (microseconds), and a
		// context done early would stop DialURLs before the second node.
		ctx, cancel := context.WithTimeout(context.Background(), waitguard.For(time.Millisecond))
		_, err := retry.DialURLs(urls, cfg)(ctx)
		cancel()
		if err == nil || len(dialed) != len(urls) {
			t.Fatalf("dialed %v, err %v; want every node tried once and an error", dialed, err)
		}
		first[dialed[0]]++
	}
	if len(first) != len(urls) {
		t.Errorf("first nodes dialed: %v; want new dialers spread over both", first)
	}
}
