package plan

import (
	"context"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Source is where the current state a plan is made against comes from: a
// live broker (internal/broker) or a definitions file or nothing at all
// (internal/definitions). Both give the same topology.State, so Diff
// cannot tell them apart.
type Source interface {
	// Read returns the state of vhosts, without message or consumer
	// counts. A vhost that does not exist is not an error: it is absent
	// from the state's Topology.Vhosts. Read changes nothing.
	Read(ctx context.Context, vhosts []string) (*topology.State, error)
	// Count adds to st the message and consumer counts of the named
	// queues, by vhost. A queue whose count the source cannot tell stays
	// absent, which Check treats as unknown and so unsafe; one that st
	// lists but that no longer exists is also added to st.Vanished. Count
	// changes nothing but st.
	Count(ctx context.Context, st *topology.State, queues map[string][]string) error
}

// Choices are what the user chose a plan to do beyond the spec.
type Choices struct {
	// Specs names the spec of each vhost of desired (its identity, see
	// spec.Spec.Name): what it may delete is what its ownership record
	// owns and no other spec's record claims (topology.OwnershipFor).
	Specs map[string]string
	// Prune deletes owned objects that left the spec.
	Prune bool
	// Migrate chooses the queue replaces that become migrations.
	Migrate Migration
	// Retire holds the hand-made queues the spec retires (spec.Retired):
	// they are the spec's to delete, once empty and with Prune.
	Retire map[topology.Address]bool
	// Expand, when set, makes the desired topology from the state Make
	// read (the spec's layout auto depends on the broker's version and
	// on what is live); the desired topology given to Make then only
	// names the vhosts to read.
	Expand func(st *topology.State) topology.Topology
}

// Make reads the vhosts of desired from src and plans the changes that
// take them to desired. Counts are read only for the queues whose fate
// depends on them: a first, count-free diff (Diff is pure and cheap) names
// the queues it would destroy or migrate and the retired wait queues it
// keeps; src counts those, and the final diff uses the counts. A plan with
// nothing destructive therefore costs one Read. When the count finds a
// queue the read listed gone (st.Vanished: the broker changed in between,
// say a killed apply's last delete still landing), the read is stale and
// Make starts again, at most readAttempts times in all; after that the
// vanished queues' counts stay unknown, which Check refuses.
func Make(ctx context.Context, src Source, desired topology.Topology, ch Choices) (Plan, *topology.State, error) {
	for attempt := 1; ; attempt++ {
		p, st, err := makeOnce(ctx, src, desired, ch)
		if err != nil || len(st.Vanished) == 0 || attempt == readAttempts {
			return p, st, err
		}
	}
}

// readAttempts bounds Make's reads when the broker keeps changing under it.
const readAttempts = 3

// makeOnce is one read, diff, count and diff of Make.
func makeOnce(ctx context.Context, src Source, desired topology.Topology, ch Choices) (Plan, *topology.State, error) {
	st, err := src.Read(ctx, desired.VhostNames())
	if err != nil {
		return Plan{}, nil, err
	}
	if ch.Expand != nil {
		desired = ch.Expand(st)
	}
	p := Diff(st, desired, ch)
	need := CountsNeeded(p)
	if len(need) == 0 {
		return p, st, nil
	}
	if err := src.Count(ctx, st, need); err != nil {
		return Plan{}, nil, err
	}
	return Diff(st, desired, ch), st, nil
}

// Diff plans the changes that take a source's state st to desired, with
// the user's choices: it is DiffTopology given
// the ownership records of the state for the specs of desired's vhosts,
// the counts read so far, the operator policies and the contract's
// wait-queue names. plan, apply and status all diff through it. It is
// pure; Make is Diff with the reading and counting around it.
func Diff(st *topology.State, desired topology.Topology, ch Choices) Plan {
	own := topology.OwnershipFor(st.Records, ch.Specs)
	maybe := map[topology.Address]bool{}
	for v := range st.NoRecords {
		// The source cannot show records: whatever of the vhost no other
		// spec claims may be this spec's.
		for a := range st.Topology.LiveAddresses() {
			if a.Vhost == v && len(own.Others[a]) == 0 {
				own.Deletable[a] = true
				maybe[a] = true
			}
		}
	}
	return DiffTopology(st.Topology, desired, Options{
		Prune:       ch.Prune,
		Migrate:     ch.Migrate,
		Retire:      ch.Retire,
		Owned:       own.Deletable,
		Owner:       own.Owner,
		Others:      own.Others,
		OthersWant:  own.OthersWant,
		Specs:       ch.Specs,
		Maybe:       maybe,
		Messages:    st.Messages,
		Consumers:   st.Consumers,
		IsWaitQueue: contract.IsWaitQueue,
		// Operator policies cap limits; see PolicyConflict.
		OperatorPolicies: st.OperatorPolicies,
		Release:          release(st),
	})
}

// OwnRecords returns, by vhost of specs, the spec's own ownership record
// in st, its owned objects limited to those that exist: what apply starts
// from and writes the next generation of.
func OwnRecords(st *topology.State, specs map[string]string) map[string]topology.Record {
	live := st.Topology.LiveAddresses()
	out := map[string]topology.Record{}
	for v, name := range specs {
		r := topology.Mine(st.Records, name, v)
		for a := range r.Owned {
			if !live[a] {
				delete(r.Owned, a)
			}
		}
		out[v] = r
	}
	return out
}

// CountsNeeded returns, by vhost, the queues of p whose message count
// matters (see Change.NeedsCount).
func CountsNeeded(p Plan) map[string][]string {
	out := map[string][]string{}
	for _, c := range p.Changes {
		if c.NeedsCount() {
			out[c.Address.Vhost] = append(out[c.Address.Vhost], c.Address.Name)
		}
		if c.Why() == WhyResumes {
			out[c.Address.Vhost] = append(out[c.Address.Vhost], contract.MigrationQueue(c.Address.Name))
		}
	}
	return out
}

// Recount replaces the message and consumer counts of p's changes that need
// them with fresh ones from src, so that a plan saved earlier is checked
// against the messages and consumers at stake now.
func Recount(ctx context.Context, src Source, p *Plan) error {
	need := CountsNeeded(*p)
	if len(need) == 0 {
		return nil
	}
	st := topology.NewState(nil)
	if err := src.Count(ctx, st, need); err != nil {
		return err
	}
	for i := range p.Changes {
		ch := &p.Changes[i]
		if !ch.NeedsCount() {
			continue
		}
		ch.EditDetails().Messages, ch.EditDetails().Consumers = nil, nil
		if n, ok := st.Messages[ch.Address]; ok {
			ch.EditDetails().Messages = &n
			if c, ok := st.Consumers[ch.Address]; ok && ch.Why() != WhyDraining {
				ch.EditDetails().Consumers = &c
			}
		}
	}
	return nil
}

// release is the state's broker version; unknown when it does not say.
func release(st *topology.State) topology.Version {
	v, _ := topology.ParseVersion(st.BrokerVersion)
	return v
}
