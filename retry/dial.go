package retry

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"
)

// DialURLs returns a Dialer for a cluster: each call tries urls in turn,
// starting after the node it last reached (the one a lost connection most
// likely came from), and returns the first connection made. A new
// Dialer's first call starts at a random node, so that the replicas of a
// service, all given the same list, spread over the cluster instead of
// all sitting on the first node and all losing it at once. It fails only
// when no node answers; Consume then backs off and calls it again. Set
// config.Dial (amqp.DefaultDial(3 * time.Second), say) so that a node
// that is down but not refusing does not hold each call for amqp091's
// default 30 s.
//
// Each dial gets its own copy of config.TLSClientConfig: amqp091 writes
// the host it dials into the ServerName of the config it is given, so one
// config shared by every node would verify them all against the first.
func DialURLs(urls []string, config amqp.Config) Dialer {
	var (
		mu   sync.Mutex
		next = -1 // not chosen yet
	)
	return func(ctx context.Context) (*amqp.Connection, error) {
		if len(urls) == 0 {
			return nil, errors.New("retry: DialURLs has no URL to dial")
		}
		mu.Lock()
		defer mu.Unlock()
		if next < 0 {
			next = rand.IntN(len(urls))
		}
		var errs []error
		for i := range urls {
			n := (next + i) % len(urls)
			c := config
			if c.TLSClientConfig != nil {
				c.TLSClientConfig = c.TLSClientConfig.Clone()
			}
			conn, err := dialWithLogin(ctx, urls[n], c)
			if err == nil {
				next = n + 1
				return conn, nil
			}
			errs = append(errs, fmt.Errorf("%s: %w", redactURL(urls[n]), err))
			if ctx.Err() != nil {
				break
			}
		}
		return nil, fmt.Errorf("retry: no node answered: %w", errors.Join(errs...))
	}
}

// redactURL is u without its password, for errors and logs.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(a URL that does not parse)"
	}
	return p.Redacted()
}
