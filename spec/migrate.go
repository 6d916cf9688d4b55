package spec

import (
	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Migrations returns the queues whose replace the files ask to be a
// migration (migrate: true): each such work queue with its DLQ, parking
// lot and per-attempt wait queues, which take its type. Addresses of
// queues the spec does not generate are harmless: only a replace of an
// existing queue becomes a migration.
func Migrations(files ...*File) map[topology.Address]bool {
	out := map[topology.Address]bool{}
	for _, f := range files {
		s := &f.Spec
		add := func(name string) {
			out[topology.Address{Kind: topology.KindQueue, Vhost: s.Vhost, Name: name}] = true
		}
		for _, q := range s.Queues {
			if !q.Migrate {
				continue
			}
			add(q.Name)
			add(DLQOf(q))
			add(contract.ParkingLotQueue(q.Name))
			add(ReturnTo(q))
			if q.Preset != PresetNone || s.layoutOf(q) != LayoutPerAttempt {
				continue
			}
			for i, d := range q.Retry.Delays() {
				add(contract.PerAttemptWaitQueue(ReturnTo(q), q.ImmediateRetries+i+1, d))
			}
		}
	}
	return out
}
