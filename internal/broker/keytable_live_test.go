package broker_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	rabbithole "github.com/michaelklishin/rabbit-hole/v2"

	"github.com/rmqtopo/rmqtopo/topology"
)

// TestKeyTableAgainstBroker asks the test's broker, whatever its version,
// about every entry of the key table: a policy with each policy key (with
// and without the keys it needs), a queue of each type with each argument,
// a transient queue, and asserts that the table's verdict, judged with
// the facts the broker gives of itself (Client.Facts), is the broker's
// answer. The broker is the truth: a disagreement is the table's to fix.
func TestKeyTableAgainstBroker(t *testing.T) {
	l := newLive(t)
	facts, err := l.c.Facts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("RabbitMQ %s; deprecated features %v; plugins %v", facts.Version, facts.Deprecated, facts.Plugins)
	if facts.Plugins == nil {
		t.Error("Facts: the enabled plugins are unknown on a broker the administrator reads")
	}
	if facts.Version.AtLeast(3, 13) && facts.Deprecated == nil {
		t.Error("Facts: no deprecated features from RabbitMQ 3.13+")
	}
	p := &prober{t: t, m: l.b.Mgmt(t), vhost: l.vhost, facts: facts}
	for _, f := range topology.VersionTable {
		switch f.Kind {
		case topology.FeaturePolicyKey:
			p.policyKey(f)
		case topology.FeatureQueueArgument:
			p.queueArgument(f)
		case topology.FeatureQueueProperty:
			p.transient(f)
		}
	}
	// What the table leaves out: a policy key RabbitMQ does not know is
	// refused, a queue argument it does not know is not checked.
	p.expect("policy key max-lenght", false, p.putPolicy(map[string]any{"max-lenght": 1}))
	for _, typ := range p.types() {
		p.expect("queue argument x-no-such-argument on a "+typ+" queue", true,
			p.declare(typ, true, map[string]any{"x-no-such-argument": 1}))
	}
	p.wg.Wait()
	t.Logf("%d probes, %d disagreements", p.probes, p.disagreements)
}

// prober asks the broker and counts the answers that the table does not
// give.
type prober struct {
	t     *testing.T
	m     *rabbithole.Client
	vhost string
	facts topology.Facts

	mu                    sync.Mutex
	n                     int
	probes, disagreements int
	wg                    sync.WaitGroup
}

// types are the queue types the broker has.
func (p *prober) types() []string {
	var out []string
	for _, typ := range []string{"classic", "quorum", "stream"} {
		if f, ok := topology.LookupFeature(topology.FeatureQueueType, typ, nil); ok && f.At(p.facts.Version) != topology.Refused {
			out = append(out, typ)
		}
	}
	return out
}

func (p *prober) next() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	return p.n
}

// expect records one probe: the broker's error, nil when it accepted.
func (p *prober) expect(what string, accepts bool, err error) {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.probes++
	if accepts == (err == nil) {
		return
	}
	p.disagreements++
	if accepts {
		p.t.Errorf("RabbitMQ %s refuses %s, which the table accepts: %v", p.facts.Version, what, err)
	} else {
		p.t.Errorf("RabbitMQ %s accepts %s, which the table refuses", p.facts.Version, what)
	}
}

// putPolicy writes a policy that matches nothing, then deletes it.
func (p *prober) putPolicy(def map[string]any) error {
	name := fmt.Sprintf("probe-%d", p.next())
	_, err := p.m.PutPolicy(p.vhost, name, rabbithole.Policy{Pattern: "^probe-matches-nothing$", ApplyTo: "all", Definition: def})
	if err == nil {
		_, _ = p.m.DeletePolicy(p.vhost, name)
	}
	return err
}

// declare declares a queue, then deletes it.
func (p *prober) declare(typ string, durable bool, args map[string]any) error {
	name := fmt.Sprintf("probe.%d", p.next())
	a := map[string]any{"x-queue-type": typ}
	for k, v := range args {
		a[k] = v
	}
	_, err := p.m.DeclareQueue(p.vhost, name, rabbithole.QueueSettings{Durable: durable, Arguments: a})
	if err == nil {
		_, _ = p.m.DeleteQueue(p.vhost, name)
	}
	return err
}

// values are the values to ask about: the entry's sample, and for an
// entry of every value, each value it may take.
func values(f topology.Feature) []any {
	if f.Value != nil || len(f.Values.Enum) == 0 {
		return []any{f.Sample()}
	}
	var out []any
	for _, s := range f.Values.Enum {
		out = append(out, s)
	}
	return out
}

// policyKey asks about a policy with the key, with the keys it needs
// beside it, and, where it needs some, without them.
func (p *prober) policyKey(f topology.Feature) {
	for _, val := range values(f) {
		g, _ := topology.LookupFeature(f.Kind, f.Name, val)
		if f.Value == nil && g.Value != nil {
			continue // the entry of that value asks
		}
		accepts := g.Judge(p.facts).Support != topology.Refused
		def := map[string]any{f.Name: val}
		for _, n := range g.Needs {
			def[n.Key] = n.Example
		}
		what := fmt.Sprintf("policy key %s %v", f.Name, val)
		p.expect(what+needsText(g.Needs), accepts, p.putPolicy(def))
		if accepts && len(g.Needs) > 0 {
			p.expect(what+" alone", false, p.putPolicy(map[string]any{f.Name: val}))
		}
	}
}

func needsText(ns []topology.Need) string {
	var ks []string
	for _, n := range ns {
		ks = append(ks, n.Key)
	}
	if len(ks) == 0 {
		return ""
	}
	return " beside " + strings.Join(ks, ", ")
}

// queueArgument asks about a queue of each type with the argument, at
// once: quorum and stream declares take a while each.
func (p *prober) queueArgument(f topology.Feature) {
	for _, typ := range p.types() {
		for _, val := range values(f) {
			g, _ := topology.LookupFeature(f.Kind, f.Name, val)
			if f.Value == nil && g.Value != nil {
				continue
			}
			accepts := g.JudgeOn(typ, p.facts).Support != topology.Refused
			args := map[string]any{f.Name: val}
			for _, n := range g.Needs {
				args[n.Key] = n.Example
			}
			what := fmt.Sprintf("queue argument %s %v on a %s queue", f.Name, val, typ)
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.expect(what+needsText(g.Needs), accepts, p.declare(typ, true, args))
				if accepts && len(g.Needs) > 0 {
					p.expect(what+" alone", false, p.declare(typ, true, map[string]any{f.Name: val}))
				}
			}()
		}
	}
}

// transient asks about a non-durable queue of each type.
func (p *prober) transient(f topology.Feature) {
	for _, typ := range p.types() {
		accepts := f.JudgeOn(typ, p.facts).Support != topology.Refused
		p.expect("a transient non-exclusive "+typ+" queue", accepts, p.declare(typ, false, nil))
	}
}
