package importer

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Hand-made retry schemes. A work queue Q whose retries someone built by
// hand: TTL queues that dead-letter back into Q when their messages expire
// (through the default exchange with routing key Q, or through an
// exchange that routes to Q), one per delay or one shared by several
// queues, and a DLQ under a name of its own (Q.failed) that Q dead-letters
// into or that is named after it. Unlike rmqtopo's own layouts and the
// presets, such a scheme cannot be written as a spec that reproduces it:
// the spec that adopts it gives Q rmqtopo's retry topology (its delays are
// the TTLs of the hand-made queues), keeps the DLQ by name (dlq_name),
// and retires the TTL queues (retire): they keep their messages and go on
// dead-lettering them back into Q at their time, and a pruning
// apply deletes each once it is empty. Where Q or its DLQ must change in a way RabbitMQ
// cannot make in place (a hand-made x-dead-letter-exchange), the spec
// migrates them (migrate: true), which keeps their messages too.

// dlqSuffixes are the names of a hand-made DLQ after its work queue, in
// the order they are tried when Q does not dead-letter anywhere.
var dlqSuffixes = []string{".dlq", ".failed", ".dead", ".dead-letter", ".dead-letters", ".error", ".errors", ".dl", "-dlq", "_dlq", "-failed", "_failed"}

// deadLetterArgs are the work queue arguments the adopted spec replaces
// with rmqtopo's dead-lettering into Q.dlx.
var deadLetterArgs = []string{"x-dead-letter-exchange", "x-dead-letter-routing-key", "x-dead-letter-strategy", "x-overflow"}

// findReturns indexes, for each queue, the hand-made TTL queues that
// dead-letter back into it (l.returns), and for each such TTL queue the
// one work queue that retires it (l.retiredBy): the first by name of
// those it returns to, since a spec retires a queue once.
func (l *live) findReturns() {
	l.returns, l.retiredBy = map[string][]string{}, map[string]string{}
	for _, r := range l.t.Queues {
		if _, ok := l.ttl(r.Name); !ok || contract.IsWaitQueue(r.Name) || l.isReturnQueue(r.Name) {
			continue
		}
		for _, target := range l.deadLettersTo(r) {
			if target == r.Name {
				continue
			}
			l.returns[target] = append(l.returns[target], r.Name)
			if by, ok := l.retiredBy[r.Name]; !ok || naturalLess(target, by) {
				l.retiredBy[r.Name] = target
			}
		}
	}
	for _, rs := range l.returns {
		slices.SortFunc(rs, func(a, b string) int { return naturalCompare(a, b) })
	}
}

// naturalCompare is naturalLess as a comparison.
func naturalCompare(a, b string) int {
	switch {
	case naturalLess(a, b):
		return -1
	case naturalLess(b, a):
		return 1
	}
	return 0
}

// isReturnQueue reports an rmqtopo return queue Q.return of a live Q.
func (l *live) isReturnQueue(name string) bool {
	q, ok := strings.CutSuffix(name, contract.ReturnQueue(""))
	_, live := l.queues[q]
	return ok && live
}

// deadLettersTo is where queue q's dead-letters go: the queue its
// x-dead-letter-routing-key names through the default exchange, or the
// queues its dead-letter exchange routes them to. A TTL queue without a
// routing key sends each message back by the key it was published with:
// through an exchange that binds queues by their own names, to any of
// them. Topic and headers patterns are not followed.
func (l *live) deadLettersTo(q topology.Queue) []string {
	dlx, ok := q.Arguments["x-dead-letter-exchange"].(string)
	if !ok {
		return nil
	}
	rk, hasKey := q.Arguments["x-dead-letter-routing-key"].(string)
	if dlx == "" {
		if _, live := l.queues[rk]; hasKey && live {
			return []string{rk}
		}
		return nil
	}
	x, ok := l.exchanges[dlx]
	if !ok {
		return nil
	}
	var out []string
	for _, b := range l.bySource[dlx] {
		switch {
		case b.DestinationType != topology.DestQueue:
		case x.Type == "fanout",
			hasKey && b.RoutingKey == rk && (x.Type == "direct" || x.Type == "topic"),
			!hasKey && b.RoutingKey == b.Destination && x.Type == "direct":
			out = append(out, b.Destination)
		}
	}
	return out
}

// handMade guesses the adoption of q's hand-made retry scheme: nil when
// no TTL queue dead-letters into q, or q has rmqtopo's own retry exchange
// (then it is rmqtopo's, or nothing).
func handMade(l *live, q topology.Queue) *candidate {
	returns := l.returns[q.Name]
	if len(returns) == 0 || l.exchanges[contract.RetryExchange(q.Name)].Name != "" {
		return nil
	}
	var delays []time.Duration
	var retired []string
	for _, r := range returns {
		if d, _ := l.ttl(r); !slices.Contains(delays, d) {
			delays = append(delays, d)
		}
		if l.retiredBy[r] == q.Name {
			retired = append(retired, r)
		}
	}
	sortDurations(delays)
	sq := spec.Queue{Name: q.Name, Type: q.QueueType(), Retry: policyFor(delays), DLQ: true, Migrate: true, Retire: retired}
	l.adoptArguments(&sq, q)
	gen := map[topology.Address]bool{}
	for _, r := range retired {
		l.generate(gen, topology.Address{Kind: topology.KindQueue, Vhost: l.vhost, Name: r})
	}
	if dlq := l.handMadeDLQ(q, returns); dlq != "" {
		if dlq != contract.DeadLetterQueue(q.Name) {
			sq.DLQName = dlq
		}
		l.generate(gen, topology.Address{Kind: topology.KindQueue, Vhost: l.vhost, Name: dlq})
	}
	note := fmt.Sprintf("adopted: its retries were TTL queues dead-lettering back into it (%s), retired\n"+
		"by the first queue they return to: they go on returning what they hold at its time, and\n"+
		"a pruning apply deletes each once empty. The delays are their TTLs, one retry each; how many\n"+
		"retries the service made is its own.", strings.Join(returns, ", "))
	return &candidate{q: sq, what: "hand-made retry scheme", note: note, generated: gen, adopt: true}
}

// generate adds queue a and the bindings into it to gen: objects the
// adopted spec takes over, which are not written as objects of their own.
func (l *live) generate(gen map[topology.Address]bool, a topology.Address) {
	gen[a] = true
	for _, b := range l.byDest[a.Name] {
		gen[b.Addr()] = true
	}
}

// adoptArguments carries q's arguments into the spec: its limits as
// their keys, its dead-lettering left to rmqtopo's, the rest as they are.
func (l *live) adoptArguments(sq *spec.Queue, q topology.Queue) {
	for k, v := range q.Arguments {
		n, isInt := v.(int64)
		switch {
		case k == "x-queue-type" || slices.Contains(deadLetterArgs, k):
		case k == "x-message-ttl" && isInt && n > 0:
			sq.MessageTTL = time.Duration(n) * time.Millisecond
		case k == "x-max-length" && isInt && n > 0:
			sq.MaxLength = n
		case k == "x-delivery-limit" && isInt && n > 0 && sq.Type == spec.TypeQuorum:
			sq.DeliveryLimit = int(n)
		default:
			if sq.Arguments == nil {
				sq.Arguments = map[string]any{}
			}
			sq.Arguments[k] = v
		}
	}
}

// handMadeDLQ finds q's hand-made DLQ: the one queue q dead-letters into,
// else a queue named after q like a DLQ; never one of its retry queues.
func (l *live) handMadeDLQ(q topology.Queue, retired []string) string {
	if to := l.deadLettersTo(q); len(to) == 1 && !slices.Contains(retired, to[0]) && to[0] != q.Name {
		return to[0]
	}
	for _, s := range dlqSuffixes {
		if _, ok := l.queues[q.Name+s]; ok && !slices.Contains(retired, q.Name+s) {
			return q.Name + s
		}
	}
	return ""
}
