package planjson_test

import (
	"testing"

	"github.com/rmqtopo/rmqtopo/plan/planjson"
	"github.com/rmqtopo/rmqtopo/topology"
)

func TestFingerprint(t *testing.T) {
	st := func() *topology.State {
		return &topology.State{
			Vhosts:   []string{"v"},
			Topology: topology.Topology{Vhosts: []string{"v"}, Queues: []topology.Queue{{Vhost: "v", Name: "q", Arguments: topology.Args{"x-message-ttl": int64(5)}}}},
			Owned:    map[topology.Address]bool{{Kind: topology.KindQueue, Vhost: "v", Name: "q"}: true},
			Messages: map[topology.Address]int64{{Kind: topology.KindQueue, Vhost: "v", Name: "q"}: 3},
		}
	}
	a, b := st(), st()
	b.Messages[topology.Address{Kind: topology.KindQueue, Vhost: "v", Name: "q"}] = 7
	if planjson.Fingerprint(a) != planjson.Fingerprint(b) {
		t.Error("message counts changed the fingerprint")
	}
	for name, mutate := range map[string]func(*topology.State){
		"argument": func(s *topology.State) { s.Topology.Queues[0].Arguments["x-message-ttl"] = int64(6) },
		"owned":    func(s *topology.State) { s.Owned = map[topology.Address]bool{} },
		"vhost":    func(s *topology.State) { s.Topology.Vhosts = nil },
	} {
		c := st()
		mutate(c)
		if planjson.Fingerprint(c) == planjson.Fingerprint(a) {
			t.Errorf("changing the %s left the fingerprint as it was", name)
		}
	}
}
