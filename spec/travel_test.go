package spec

import (
	"strings"
	"testing"

	"github.com/rmqtopo/rmqtopo/topology"
)

const travelSpec = `version: 1
levels: {resolution: 100ms, max: 3s}
queues:
  - {name: s, type: quorum, return_queue: true, retry: {delays: [1s, 5s]}}
  - {name: p, layout: per-attempt, retry: {delays: [1s]}}
  - {name: l, layout: levels, immediate_retries: 2, return_queue: true, retry: {delays: [1s]}}
  - {name: fixed, type: quorum, layout: native, retry: {delays: [2s, 2s]}}
  - {name: linear, type: quorum, layout: native, retry: {delays: [2s, 4s, 6s, 6s]}}
  - {name: expo, type: quorum, layout: native, retry: {delays: [1s, 2s, 4s]}}
  - {name: now, type: quorum, layout: native, immediate_retries: 1, retry: {delays: [2s]}}
  - {name: quick, immediate_retries: 2}
  - {name: none}
  - {name: o, preset: outbox, retry: {delays: [1s]}}
`

// TestTravelOf checks, per layout, the route a queue's retries take and
// whether a RetryAfter is honoured there: what the helper does with one
// (retry.route.decide).
func TestTravelOf(t *testing.T) {
	f, err := Parse("t.yaml", []byte(travelSpec))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct{ honoured, has string }{
		"s":      {RetryAfterIgnored, "rmqtopo.wait.{delay}, shared by delay, back through the return queue s.return; RetryAfter: not honoured (a wait queue's TTL"},
		"p":      {RetryAfterIgnored, "wait queues p.wait.{n}.{delay}, one per retry; RetryAfter"},
		"l":      {RetryAfterHonoured, "back through the return queue l.return; RetryAfter: honoured (up to 3.1s, with retry.WithLevels; not on the 2 immediate retries, which come back at once)"},
		"fixed":  {RetryAfterIgnored, "(native, basic.reject: 2s each); RetryAfter: not honoured (the queue's own delay"},
		"linear": {RetryAfterIgnored, "(native, basic.reject: linear 2s steps up to 6s)"},
		"expo":   {RetryAfterHonoured, "(native, AMQP 1.0 modified with a delivery time); RetryAfter: honoured"},
		// An immediate retry is a zero delay, which the broker cannot
		// express: the AMQP 1.0 route, which honours it.
		"now":   {RetryAfterHonoured, "AMQP 1.0"},
		"quick": {RetryAfterIgnored, "back into quick at once (immediate retries only); RetryAfter: not honoured"},
		"none":  {RetryAfterNotApplicable, "none, a failure goes to none.dlq; RetryAfter: does not apply"},
		"o":     {RetryAfterNotApplicable, "outbox preset"},
	}
	for _, q := range f.Spec.Queues {
		w, ok := want[q.Name]
		if !ok {
			t.Fatalf("no case for queue %s", q.Name)
		}
		got := f.Spec.TravelOf(q)
		if got.RetryAfter != w.honoured || !strings.Contains(got.String(), w.has) {
			t.Errorf("%s: %q; want RetryAfter %s and %q in it", q.Name, got, w.honoured, w.has)
		}
		if got.Honoured() != (w.honoured == RetryAfterHonoured) {
			t.Errorf("%s: Honoured() = %v", q.Name, got.Honoured())
		}
	}
}

// TestTravelOthers: where a return queue holds a quorum queue's retries
// for retry.Consume (3.x, a classic queue, or return_queue: true), Others
// says what any other consumer sees: behind the backlog without quorum
// priorities, ahead of it with them; a 4.0+ quorum queue without a return
// queue brings its retries back at priority, with no Others line.
func TestTravelOthers(t *testing.T) {
	const src = `version: 1
queues:
  - {name: q, type: quorum, retry: {delays: [1s]}}
  - {name: c, type: classic, retry: {delays: [1s]}}
  - {name: r, type: quorum, return_queue: true, retry: {delays: [1s]}}
`
	for _, c := range []struct {
		version string
		q, c, r string // a part of Others; "" for none
		route   string // a part of q's route
	}{
		{"3.10.8", "5s after its delay, behind the backlog of q; it can consume q.return ahead of q", "behind the backlog of c", "behind the backlog of r", "back through the return queue q.return"},
		{"", "behind the backlog of q", "behind the backlog of c", "behind the backlog of r", "back through the return queue q.return"},
		{"4.0.5", "", "behind the backlog of c", "ahead of the backlog of r (message priority)", "back into q at message priority 9, ahead of its backlog to every consumer"},
	} {
		f, err := Parse("o.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		v, _ := topology.ParseVersion(c.version)
		Resolve([]*File{f}, Target{RabbitMQ: v})
		for i, want := range []string{c.q, c.c, c.r} {
			got := f.Spec.TravelOf(f.Spec.Queues[i])
			if (want == "") != (got.Others == "") || !strings.Contains(got.Others, want) {
				t.Errorf("%q: %s: Others %q; want %q in it", c.version, f.Spec.Queues[i].Name, got.Others, want)
			}
		}
		if got := f.Spec.TravelOf(f.Spec.Queues[0]).Route; !strings.Contains(got, c.route) {
			t.Errorf("%q: q's route %q; want %q in it", c.version, got, c.route)
		}
	}
}
