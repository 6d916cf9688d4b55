package topology

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strings"
)

// RecordPrefix starts the name of the exchange that holds one spec's
// ownership record in a vhost: "rmqtopo.owner.<spec>.<generation>". The
// record lives in the vhost it describes, so it is deleted with the vhost,
// carried in a vhost's definitions export and readable by any user who may
// list the vhost's exchanges. Such exchanges are rmqtopo's bookkeeping:
// they never appear in a plan.
const RecordPrefix = "rmqtopo.owner."

// IsRecordExchange reports whether an exchange name is one of rmqtopo's
// ownership records.
func IsRecordExchange(name string) bool { return strings.HasPrefix(name, RecordPrefix) }

// Record is one spec's ownership record in one vhost: every object the
// spec declares (Claims, with a digest of the attributes it wants) and the
// objects rmqtopo created for it (Owned). An object is deleted only when
// the spec that owns it no longer declares it and no other spec's record
// claims it.
type Record struct {
	// Spec is the spec's identity (its top-level name).
	Spec  string `json:"spec"`
	Vhost string `json:"vhost"`
	// Generation increases with every write; the newest one wins when a
	// crash left two behind.
	Generation int64 `json:"generation"`
	// Claims maps every object the spec declares to the digest of its
	// attributes (see Digest); bindings have none.
	Claims map[Address]string `json:"-"`
	// Owned holds the objects rmqtopo created for this spec and that
	// existed when the record was written.
	Owned map[Address]bool `json:"-"`
}

// NewRecord returns an empty record of spec in vhost.
func NewRecord(spec, vhost string) Record {
	return Record{Spec: spec, Vhost: vhost, Claims: map[Address]string{}, Owned: map[Address]bool{}}
}

// Clone returns a deep copy of r.
func (r Record) Clone() Record {
	out := r
	out.Claims = make(map[Address]string, len(r.Claims))
	for a, d := range r.Claims {
		out.Claims[a] = d
	}
	out.Owned = make(map[Address]bool, len(r.Owned))
	for a, ok := range r.Owned {
		if ok {
			out.Owned[a] = true
		}
	}
	return out
}

// ExchangeName is the name of the exchange that holds this generation.
func (r Record) ExchangeName() string {
	return RecordPrefix + r.Spec + "." + itoa(r.Generation)
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// Digest is a short, stable fingerprint of the attributes of an exchange,
// queue or policy (nil for anything else gives ""), used to tell two specs
// that want the same object differently. Arguments are normalised first,
// so integer widths do not matter.
func Digest(v any) string {
	var canon any
	switch x := v.(type) {
	case Exchange:
		x.Arguments = NormalizeArgs(x.Arguments)
		canon = x
	case Queue:
		x.Arguments = NormalizeArgs(x.Arguments)
		if x.Arguments["x-queue-type"] == "classic" {
			delete(x.Arguments, "x-queue-type")
		}
		if len(x.Arguments) == 0 {
			x.Arguments = nil
		}
		canon = x
	case Policy:
		x.Definition = NormalizeArgs(x.Definition)
		canon = x
	default:
		return ""
	}
	b, err := json.Marshal(canon)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}

// Ownership is what one spec may do with the objects of the vhosts a state
// describes, derived from every record in them: the objects it may delete
// and, for the objects it may not, the other specs that still need them.
type Ownership struct {
	// Deletable holds the objects this spec's records own that no other
	// spec's record claims.
	Deletable map[Address]bool
	// Owner names the record that makes each deletable object this
	// spec's, e.g. `record "orders" (exchange rmqtopo.owner.orders.4)`.
	Owner map[Address]string
	// Others maps an object to the other specs that claim it, sorted.
	Others map[Address][]string
	// OthersWant maps an object another spec claims to its digest, by spec.
	OthersWant map[Address]map[string]string
}

// OwnershipFor derives the ownership of spec (by vhost) from records.
func OwnershipFor(records []Record, spec map[string]string) Ownership {
	o := Ownership{Deletable: map[Address]bool{}, Owner: map[Address]string{}, Others: map[Address][]string{},
		OthersWant: map[Address]map[string]string{}}
	for _, r := range records {
		if spec[r.Vhost] == r.Spec {
			continue
		}
		for a, d := range r.Claims {
			o.Others[a] = append(o.Others[a], r.Spec)
			if o.OthersWant[a] == nil {
				o.OthersWant[a] = map[string]string{}
			}
			o.OthersWant[a][r.Spec] = d
		}
		// An object another spec owns but no longer declares is still
		// that spec's to delete, never this one's.
		for a := range r.Owned {
			if _, ok := r.Claims[a]; !ok {
				o.Others[a] = append(o.Others[a], r.Spec)
			}
		}
	}
	for a := range o.Others {
		sort.Strings(o.Others[a])
	}
	for _, r := range records {
		if spec[r.Vhost] != r.Spec {
			continue
		}
		// One string for all of the record's objects, and maps sized
		// once: 16,000 owned objects made this a good part of a plan.
		owner := "record of spec \"" + r.Spec + "\" (exchange " + r.ExchangeName() + ")"
		if len(o.Deletable) == 0 {
			o.Deletable = make(map[Address]bool, len(r.Owned))
			o.Owner = make(map[Address]string, len(r.Owned))
		}
		for a := range r.Owned {
			if len(o.Others[a]) == 0 {
				o.Deletable[a] = true
				o.Owner[a] = owner
			}
		}
	}
	return o
}

// Mine returns the record of spec in vhost among records, or an empty one.
func Mine(records []Record, spec, vhost string) Record {
	for _, r := range records {
		if r.Spec == spec && r.Vhost == vhost {
			return r.Clone()
		}
	}
	return NewRecord(spec, vhost)
}

// LiveAddresses returns the address of every object of t.
func (t Topology) LiveAddresses() map[Address]bool {
	out := map[Address]bool{}
	for _, v := range t.Vhosts {
		out[Address{Kind: KindVhost, Name: v}] = true
	}
	for _, e := range t.Exchanges {
		out[e.Addr()] = true
	}
	for _, q := range t.Queues {
		out[q.Addr()] = true
	}
	for _, b := range t.Bindings {
		out[b.Addr()] = true
	}
	for _, p := range t.Policies {
		out[p.Addr()] = true
	}
	return out
}
