// Package rabbitmq describes each RabbitMQ release rmqtopo knows: one
// Profile per release that behaves differently, which every part of
// rmqtopo asks for a capability (p.NativeDelayedRetry(),
// p.DefaultDeliveryLimit()...) instead of comparing version numbers, and
// the releases the test suite runs on.
//
// What a release accepts, key by key (policy keys, queue arguments, queue
// types), is topology.VersionTable, judged at a profile's Version; what
// it does beyond that is here. The package is a leaf (the standard
// library only) so that the runtime helper, retry, may consult it.
//
// A new release with one new behaviour is one Entry in Table (a copy of
// the one before with that behaviour changed) plus its tests; a new
// behaviour is one field of Traits, its accessor, its value in each entry,
// and the callers that ask for it.
package rabbitmq

import (
	"fmt"
	"slices"
)

// Traits is what a release does that rmqtopo depends on, beyond the keys
// it accepts. Its zero value is what rmqtopo assumes of a release it
// cannot name: nothing any release lacks.
type Traits struct {
	// DefaultDeliveryLimit is the delivery limit a quorum queue gets when
	// neither an argument nor a policy sets one; 0: none.
	DefaultDeliveryLimit int
	// NegativeLimitIsNone: a negative delivery limit means no limit and
	// loses to any other given. Before, any given limit counts, and one
	// below 1 drops a message at its first requeue (seen on 3.10.8).
	NegativeLimitIsNone bool
	// ClientDeathIgnored: the broker no longer reads the x-death headers
	// that clients publish.
	ClientDeathIgnored bool
	// NackUncounted: a basic.nack with requeue is no delivery towards the
	// queue's delivery limit (x-delivery-count grows only for failures:
	// basic.reject, a lost connection) and every delivery raises
	// x-acquired-count; a message dead-lettered from a quorum queue keeps
	// its delivery count.
	NackUncounted bool
	// ExportReadFastest: a vhost's definitions export is the fastest read
	// of its queues, bindings and policies, faster than their listings.
	ExportReadFastest bool
	// NativeDelayedRetry: a quorum queue delays its own retries by its
	// x-delayed-retry-* arguments and delayed-retry-* policy keys, which
	// the native layout is built on.
	NativeDelayedRetry bool
	// QuorumPriorities: a quorum queue delivers a message of a priority
	// above 4 ahead of its backlog, with no queue argument (4.0: two
	// levels, two high for one normal, rabbit_fifo_q.erl at v4.0.5; 4.3:
	// 32 strict levels, a message without one at 4, rabbit_fifo.erl and
	// rabbit_fifo_pq.erl at v4.3.0; release-notes/4.0.1.md #10637,
	// 4.3.0.md #13885). Every release refuses x-max-priority on a quorum
	// queue; 3.x quorum queues deliver in order whatever the priority.
	// Probed live on 3.10.8, 4.0.5 and 4.3.6 (docs/versions.md).
	QuorumPriorities bool
}

// Tested is a release the test suite runs on, and where the test harness
// (internal/brokertest) gets it.
type Tested struct {
	// Version is the release the suite runs: 4.3.6. Its Series (4.3) is
	// what `make test RABBITMQ=...` names.
	Version Version
	// Debian is the Debian suite whose rabbitmq-server package the harness
	// installs into a private root; "" for the host's own (Debian 12).
	Debian string
}

// Entry is one profile as Table writes it: the first release that behaves
// so, until the next entry's.
type Entry struct {
	From Version
	Traits
	// Tested, when not nil, is the release of this profile the suite runs.
	Tested *Tested
	// Cite says where the entry's changes come from.
	Cite string
}

// BrokerDeliveryLimit is the delivery limit RabbitMQ gives a quorum queue
// that sets none, from 4.0 on. rmqtopo's own default (spec's
// DefaultDeliveryLimit) is the same, so that its queues need no argument
// there.
const BrokerDeliveryLimit = 20

// Table holds the profiles, oldest first: each entry whole, a copy of the
// one before with what changed at its release. A release older than the
// first is judged by the first (the key table judges from 3.8 on).
var Table = []Entry{
	{From: Version{Major: 3, Minor: 8}, Tested: &Tested{Version: Version{Major: 3, Minor: 10, Patch: 8}},
		Cite: "the quorum queues of release-notes/3.8.0.md"},
	{From: Version{Major: 4}, Tested: &Tested{Version: Version{Major: 4, Patch: 5}, Debian: "trixie"},
		Traits: Traits{DefaultDeliveryLimit: BrokerDeliveryLimit, NegativeLimitIsNone: true, ClientDeathIgnored: true, QuorumPriorities: true},
		Cite:   "rabbit_quorum_queue.erl at v4.0.0 (DEFAULT_DELIVERY_LIMIT, args_policy_lookup); release-notes/4.0.1.md (AMQP 0.9.1 x-death header); seen on 4.0.5"},
	{From: Version{Major: 4, Minor: 3},
		Traits: Traits{DefaultDeliveryLimit: BrokerDeliveryLimit, NegativeLimitIsNone: true, ClientDeathIgnored: true, NackUncounted: true, ExportReadFastest: true, QuorumPriorities: true},
		Cite:   "rabbitmq-server #15387 (nack uncounted, x-acquired-count); the export and listings timed on 3.10.8, 4.0.5 and 4.3.6 (docs/benchmarks.md)"},
	{From: Version{Major: 4, Minor: 3, Patch: 1}, Tested: &Tested{Version: Version{Major: 4, Minor: 3, Patch: 6}, Debian: "sid"},
		Traits: Traits{DefaultDeliveryLimit: BrokerDeliveryLimit, NegativeLimitIsNone: true, ClientDeathIgnored: true, NackUncounted: true, ExportReadFastest: true, NativeDelayedRetry: true, QuorumPriorities: true},
		Cite:   "release-notes/4.3.1.md: the delayed-retry-* policy keys get their validator (rabbitmq-server #16395); 4.3.0 has the arguments only"},
}

// Profile is what one release does: the profile of the newest entry of
// Table at or before the version it was asked for.
type Profile struct {
	version Version
	entry   Entry
}

// ProfileFor returns the profile of release v: the newest entry at or
// before v. An unknown v (the zero Version) gets a profile that is not
// Known, with the zero Traits; a v newer than every entry's series gets
// the newest entry, and says so (Beyond).
func ProfileFor(v Version) Profile {
	if !v.Known() || len(Table) == 0 {
		return Profile{version: v}
	}
	e := Table[0]
	for _, next := range Table[1:] {
		if v.Less(next.From) {
			break
		}
		e = next
	}
	return Profile{version: v, entry: e}
}

// ProfileOf returns the profile of the release a broker names ("4.3.6",
// /api/overview's rabbitmq_version, the AMQP server property version): an
// unknown profile, and the error, when it names none.
func ProfileOf(version string) (Profile, error) {
	v, err := ParseVersion(version)
	return ProfileFor(v), err
}

// Profiles returns the profile of each entry of Table at its first
// release, oldest first: the releases rmqtopo knows apart.
func Profiles() []Profile {
	out := make([]Profile, len(Table))
	for i, e := range Table {
		out[i] = Profile{version: e.From, entry: e}
	}
	return out
}

// TestedReleases returns the releases the test suite runs on, oldest
// first.
func TestedReleases() []Tested {
	var out []Tested
	for _, e := range Table {
		if e.Tested != nil {
			out = append(out, *e.Tested)
		}
	}
	return out
}

// First returns the first release whose profile has capability has
// (rabbitmq.Profile.NativeDelayedRetry), for messages that name it; the
// zero Version when none has.
func First(has func(Profile) bool) Version {
	i := slices.IndexFunc(Profiles(), has)
	if i < 0 {
		return Version{}
	}
	return Table[i].From
}

// Version is the release the profile was asked for.
func (p Profile) Version() Version { return p.version }

// Known reports whether the release is known; an unknown one has the
// zero Traits, and each caller decides what it assumes of it.
func (p Profile) Known() bool { return p.version.Known() }

// Release is the first release of the profile's entry: 4.3.1 for 4.3.6.
func (p Profile) Release() Version { return p.entry.From }

// Beyond reports whether the release is of a series newer than every
// entry's: rmqtopo judges it as the newest it knows, which it may not be.
func (p Profile) Beyond() bool {
	if !p.Known() || len(Table) == 0 {
		return false
	}
	last := Table[len(Table)-1].From
	return p.version.Major > last.Major || p.version.Major == last.Major && p.version.Minor > last.Minor
}

// Tested returns the release of the profile the suite runs on, if any.
func (p Profile) Tested() (Tested, bool) {
	if p.entry.Tested == nil {
		return Tested{}, false
	}
	return *p.entry.Tested, true
}

// Traits returns the profile's traits, to compare two profiles or to
// write a new entry from an old one.
func (p Profile) Traits() Traits { return p.entry.Traits }

// String names the release and the profile it gets: "4.3.6 (profile
// 4.3.1)".
func (p Profile) String() string {
	if !p.Known() {
		return "unknown"
	}
	return fmt.Sprintf("%s (profile %s)", p.version, p.entry.From)
}

// DefaultDeliveryLimit is the delivery limit a quorum queue gets when
// neither an argument nor a policy sets one; 0: none.
func (p Profile) DefaultDeliveryLimit() int { return p.entry.DefaultDeliveryLimit }

// NegativeLimitIsNone: see Traits.
func (p Profile) NegativeLimitIsNone() bool { return p.entry.NegativeLimitIsNone }

// ClientDeathIgnored: see Traits.
func (p Profile) ClientDeathIgnored() bool { return p.entry.ClientDeathIgnored }

// NackUncounted: see Traits.
func (p Profile) NackUncounted() bool { return p.entry.NackUncounted }

// ExportReadFastest: see Traits.
func (p Profile) ExportReadFastest() bool { return p.entry.ExportReadFastest }

// NativeDelayedRetry: see Traits.
func (p Profile) NativeDelayedRetry() bool { return p.entry.NativeDelayedRetry }

// QuorumPriorities: see Traits. False for an unknown release, which must
// be judged the cautious way.
func (p Profile) QuorumPriorities() bool { return p.entry.QuorumPriorities }

// Capability is one capability of a profile by the name of its accessor,
// and its value.
type Capability struct {
	Name  string
	Value any
}

// Capabilities lists every capability of the profile, in Traits' order:
// two releases (an upgrade's source and target) differ where these do.
func (p Profile) Capabilities() []Capability {
	return []Capability{
		{"DefaultDeliveryLimit", p.DefaultDeliveryLimit()},
		{"NegativeLimitIsNone", p.NegativeLimitIsNone()},
		{"ClientDeathIgnored", p.ClientDeathIgnored()},
		{"NackUncounted", p.NackUncounted()},
		{"ExportReadFastest", p.ExportReadFastest()},
		{"NativeDelayedRetry", p.NativeDelayedRetry()},
		{"QuorumPriorities", p.QuorumPriorities()},
	}
}

// Series is the release series of a tested release: "4.3".
func (t Tested) Series() string { return t.Version.Series() }
