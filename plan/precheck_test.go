package plan

import (
	"strings"
	"testing"

	"github.com/rmqtopo/rmqtopo/topology"
)

func TestPrecheck(t *testing.T) {
	pol := topology.Policy{Vhost: "v", Name: "p", Pattern: ".*", ApplyTo: "queues",
		Definition: topology.Args{"max-lenght": int64(1), "dead-letter-strategy": "at-least-once"}}
	classic := topology.Queue{Vhost: "v", Name: "c", Durable: true, Arguments: topology.Args{"x-delivery-limit": int64(3)}}
	bind := func(src string) topology.Binding {
		return topology.Binding{Vhost: "v", Source: src, Destination: "c", DestinationType: topology.DestQueue}
	}
	p := Plan{Changes: []Change{
		{Action: Create, Address: pol.Addr(), After: &Object{Policy: &pol}},
		{Action: Create, Address: classic.Addr(), After: &Object{Queue: &classic}},
	}}
	for _, src := range []string{"amq.doesnotexist", "amq.topic", "nowhere", "live"} {
		b := bind(src)
		p.Changes = append(p.Changes, Change{Action: Create, Address: b.Addr(), After: &Object{Binding: &b}})
	}
	live := &topology.Topology{Exchanges: []topology.Exchange{{Vhost: "v", Name: "live", Type: "direct"}}}
	var got []string
	for _, d := range precheck(p, live, topology.Facts{Version: topology.Version{Major: 3, Minor: 9, Patch: 29}}) {
		got = append(got, d.Code+" "+d.Message)
	}
	want := []string{
		`RT009 policy "p" in vhost "v": RabbitMQ 3.9.29 does not accept the policy key "dead-letter-strategy" (since RabbitMQ 3.10.0)`,
		`RT009 policy "p" in vhost "v": RabbitMQ does not accept the policy key "max-lenght"; did you mean "max-length"?`,
		`RT011 queue "c" in vhost "v": a classic queue does not accept x-delivery-limit (only quorum queues do)`,
		`RT010 binding "amq.doesnotexist -> c" [queue key=""] in vhost "v": "amq.doesnotexist" is not a built-in exchange`,
		`RT010 binding "nowhere -> c" [queue key=""] in vhost "v": exchange "nowhere" exists neither in the spec nor on the broker`,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d diagnostics:\n%s", len(got), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("diagnostic %d:\n got %s\nwant %s…", i, got[i], want[i])
		}
	}
}

func TestNearestPolicyKey(t *testing.T) {
	if got := nearest("max-lenght"); got != "max-length" {
		t.Errorf("nearest(max-lenght) = %q, want max-length", got)
	}
	if nearest("no-such-thing-at-all") != "" {
		t.Error("a key far from every known one got a suggestion")
	}
}

func TestCheckAccess(t *testing.T) {
	q := topology.Queue{Vhost: "v", Name: "work"}
	pol := topology.Policy{Vhost: "v", Name: "p"}
	p := Plan{Changes: []Change{
		{Action: Create, Address: topology.Address{Kind: topology.KindVhost, Name: "new"}, After: &Object{}},
		{Action: Create, Address: q.Addr(), After: &Object{Queue: &q}},
		{Action: Create, Address: pol.Addr(), After: &Object{Policy: &pol}},
	}}
	a := topology.Access{User: "ci", Tags: []string{"management"},
		Permissions: map[string]topology.Permission{"v": {Configure: "^(rmqtopo\\.|other)", Write: ".*", Read: ".*"}}}
	var got []string
	for _, d := range checkAccess(p, map[string]string{"v": "s"}, a) {
		got = append(got, d.Message)
	}
	want := []string{
		`user "ci" may not create vhost "new": that needs the administrator tag (tags: management)`,
		`user "ci" may not create queue "work" in vhost "v": configure permission "^(rmqtopo\\.|other)" does not match it`,
		`user "ci" may not create policy "p" in vhost "v": that needs the policymaker or administrator tag (tags: management)`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	a.Permissions = nil // unknown: left to the broker
	if n := len(checkAccess(p, nil, a)); n != 2 {
		t.Errorf("with unknown permissions, %d diagnostics, want the 2 about tags", n)
	}
}
