package broker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/topology"
)

// TestCountNeverFalseZero: a quorum queue whose leader does not answer is
// counted 0 messages, 0 consumers by RabbitMQ 3.x's passive declare. The
// count a plan shows for a destructive change must then be unknown (which
// plan.Check refuses), never that 0; once the leader answers, the count is
// exact again, and an empty quorum queue still counts 0.
func TestCountNeverFalseZero(t *testing.T) {
	t.Parallel()
	l, conn, q := guardSetup(t)
	if l.b.Node == nil {
		t.Skip("suspends a queue's leader with rabbitmqctl eval: needs the private node")
	}
	publish(t, conn, "", "work", nil, 3)
	// The fallback needs the statistics to have seen the messages: the
	// quorum queue reports them on its tick (seconds).
	waitStats(t, l, "work", 3)
	addr := topology.Address{Kind: topology.KindQueue, Vhost: l.vhost, Name: "work"}
	count := func() (int64, bool) {
		t.Helper()
		st := &topology.State{Topology: topology.Topology{Queues: []topology.Queue{q}},
			Messages: map[topology.Address]int64{}, Consumers: map[topology.Address]int64{}}
		if err := l.c.Count(context.Background(), st, map[string][]string{l.vhost: {"work"}}); err != nil {
			t.Fatal(err)
		}
		n, ok := st.Messages[addr]
		return n, ok
	}
	resume := suspendLeader(t, l, "work")
	if n, ok := count(); ok {
		t.Errorf("with its leader suspended the queue counted %d messages, want unknown", n)
	}
	resume()
	if n, ok := count(); !ok || n != 3 {
		t.Errorf("with its leader back the queue counted %d (known %v), want 3", n, ok)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if _, err := ch.QueuePurge("work", false); err != nil {
		t.Fatal(err)
	}
	// Until the statistics see the purge, a 0/0 is doubtful: unknown is
	// the safe answer for those seconds, and 0 the only one after.
	if n, ok := count(); ok && n != 0 {
		t.Errorf("the emptied queue counted %d, want 0 or unknown", n)
	}
	waitStats(t, l, "work", 0)
	if n, ok := count(); !ok || n != 0 {
		t.Errorf("the emptied queue counted %d (known %v), want 0", n, ok)
	}
}

// waitStats waits until the management statistics count n messages in
// queue; a quorum queue reports on its tick, every few seconds.
func waitStats(t *testing.T, l *live, queue string, n int64) {
	t.Helper()
	for deadline := waitguard.Deadline(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		stats, err := l.c.QueueCounts(context.Background(), l.vhost, []string{queue})
		if err != nil {
			t.Fatal(err)
		}
		if s, ok := stats[queue]; ok && s.Messages == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the statistics never counted %d messages in %q: %+v", n, queue, stats)
		}
	}
}

// suspendLeader suspends the Ra server that leads quorum queue name with
// sys:suspend, so that it answers nothing until the returned resume is
// called; the test's cleanup resumes it in any case.
func suspendLeader(t *testing.T, l *live, name string) (resume func()) {
	t.Helper()
	leaderCtl(t, l, name, "suspend")
	resume = sync.OnceFunc(func() { leaderCtl(t, l, name, "resume") })
	t.Cleanup(resume)
	return resume
}

func leaderCtl(t *testing.T, l *live, name, call string) {
	t.Helper()
	expr := fmt.Sprintf(`{ok, Q} = rabbit_amqqueue:lookup(rabbit_misc:r(<<"%s">>, queue, <<"%s">>)), {Name, _} = amqqueue:get_pid(Q), sys:%s(whereis(Name)).`, l.vhost, name, call)
	if out, err := l.b.Node.Ctl(context.Background(), "eval", expr); err != nil {
		t.Fatalf("rabbitmqctl eval sys:%s: %v: %s", call, err, out)
	}
}
