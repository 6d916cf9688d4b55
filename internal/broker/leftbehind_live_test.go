package broker_test

import (
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/spec"
)

// TestLeftBehindQueueCounted: a queue dropped from the spec without
// --prune is kept, and the plan warns with its exact count at once (no
// statistics to wait for) and the command that would remove it.
func TestLeftBehindQueueCounted(t *testing.T) {
	t.Parallel()
	l := newLive(t)
	const both = "version: 1\nqueues:\n  - {name: stay, type: quorum}\n  - {name: gone, type: quorum}\n"
	const one = "version: 1\nqueues:\n  - {name: stay, type: quorum}\n"
	l.converge(t, spec.Expand(parseFor(t, "s.yaml", []byte(both), l.vhost)), false)
	conn := l.b.Dial(t, l.vhost)
	for i := 0; i < 3; i++ {
		send(t, conn, "", "gone", amqp.Publishing{Body: []byte("m")})
	}
	p, _ := l.plan(t, spec.Expand(parseFor(t, "s.yaml", []byte(one), l.vhost)), false)
	var warned bool
	for _, d := range plan.Check(p, plan.CheckOptions{}) {
		if d.Code == plan.CodeQueueLeftBehind && d.Address.Name == "gone" {
			warned = true
			if d.Messages != 3 {
				t.Errorf("RT013 counts %d messages, want 3: %s", d.Messages, d.Message)
			}
		}
	}
	if !warned {
		t.Errorf("no RT013 for the dropped queue; plan: %+v", p.Changes)
	}
	if p.HasChanges() {
		t.Errorf("without --prune, dropping a queue changed something: %+v", p.Changes)
	}
}
