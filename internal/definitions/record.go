package definitions

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/rmqtopo/rmqtopo/topology"
)

// RecordArgument is the exchange argument that holds an ownership record,
// as a JSON string (see topology.RecordPrefix).
const RecordArgument = "rmqtopo-record"

// RecordFormatVersion versions the record's JSON.
const RecordFormatVersion = 1

// recordJSON is the record as stored. Names are grouped by kind and the
// vhost is stated once, which keeps a record of 16,000 objects near a
// megabyte. Each entry is [name, digest, flags] ([name, key, flags] for a
// binding); flags hold "c" when the spec declares the object and "o" when
// rmqtopo created it for the spec.
type recordJSON struct {
	FormatVersion int        `json:"format_version"`
	Spec          string     `json:"spec"`
	Vhost         string     `json:"vhost"`
	Generation    int64      `json:"generation"`
	Exchanges     [][]string `json:"exchanges"`
	Queues        [][]string `json:"queues"`
	Policies      [][]string `json:"policies"`
	Bindings      [][]string `json:"bindings"`
}

// EncodeRecord gives the JSON text of r.
func EncodeRecord(r topology.Record) (string, error) {
	j := recordJSON{FormatVersion: RecordFormatVersion, Spec: r.Spec, Vhost: r.Vhost, Generation: r.Generation,
		Exchanges: [][]string{}, Queues: [][]string{}, Policies: [][]string{}, Bindings: [][]string{}}
	all := map[topology.Address]bool{}
	for a := range r.Claims {
		all[a] = true
	}
	for a, ok := range r.Owned {
		if ok {
			all[a] = true
		}
	}
	addrs := make([]topology.Address, 0, len(all))
	for a := range all {
		addrs = append(addrs, a)
	}
	sort.Slice(addrs, func(i, k int) bool { return addrs[i].Less(addrs[k]) })
	for _, a := range addrs {
		flags := ""
		d, claimed := r.Claims[a]
		if claimed {
			flags += "c"
		}
		if r.Owned[a] {
			flags += "o"
		}
		switch a.Kind {
		case topology.KindExchange:
			j.Exchanges = append(j.Exchanges, []string{a.Name, d, flags})
		case topology.KindQueue:
			j.Queues = append(j.Queues, []string{a.Name, d, flags})
		case topology.KindPolicy:
			j.Policies = append(j.Policies, []string{a.Name, d, flags})
		case topology.KindBinding:
			j.Bindings = append(j.Bindings, []string{a.Name, a.Key, flags})
		}
	}
	b, err := json.Marshal(j)
	return string(b), err
}

// DecodeRecord reads the record held by exchange e.
func DecodeRecord(e Exchange) (topology.Record, error) {
	fail := func(format string, args ...any) (topology.Record, error) {
		return topology.Record{}, fmt.Errorf("ownership record %q in vhost %q: %s", e.Name, e.Vhost, fmt.Sprintf(format, args...))
	}
	raw, ok := e.Arguments[RecordArgument].(string)
	if !ok {
		return fail("no %s argument", RecordArgument)
	}
	var j recordJSON
	if err := json.Unmarshal([]byte(raw), &j); err != nil {
		return fail("%v", err)
	}
	if j.FormatVersion != RecordFormatVersion {
		return fail("format_version %d; this rmqtopo reads %d", j.FormatVersion, RecordFormatVersion)
	}
	r := topology.NewRecord(j.Spec, e.Vhost)
	// Sized once: a record may name 16,000 objects.
	n := len(j.Exchanges) + len(j.Queues) + len(j.Policies) + len(j.Bindings)
	r.Claims, r.Owned = make(map[topology.Address]string, n), make(map[topology.Address]bool, n)
	r.Generation = j.Generation
	groups := []struct {
		kind    topology.Kind
		entries [][]string
	}{{topology.KindExchange, j.Exchanges}, {topology.KindQueue, j.Queues}, {topology.KindPolicy, j.Policies}, {topology.KindBinding, j.Bindings}}
	for _, g := range groups {
		for _, en := range g.entries {
			if len(en) != 3 {
				return fail("malformed %s entry %q", g.kind, en)
			}
			a := topology.Address{Kind: g.kind, Vhost: e.Vhost, Name: en[0]}
			digest := en[1]
			if g.kind == topology.KindBinding {
				a.Key, digest = en[1], ""
			}
			if strings.Contains(en[2], "c") {
				r.Claims[a] = digest
			}
			if strings.Contains(en[2], "o") {
				r.Owned[a] = true
			}
		}
	}
	return r, nil
}

// recordGeneration parses the generation at the end of a record
// exchange's name; ok is false for a name that is not one.
func recordGeneration(name string) (spec string, gen int64, ok bool) {
	rest, found := strings.CutPrefix(name, topology.RecordPrefix)
	i := strings.LastIndexByte(rest, '.')
	if !found || i <= 0 {
		return "", 0, false
	}
	gen, err := strconv.ParseInt(rest[i+1:], 10, 64)
	return rest[:i], gen, err == nil
}

// Records reads the ownership records among d's exchanges in the given
// vhosts (all when none are given): the newest generation of each spec
// in each vhost. An older generation left by an apply killed between
// writing a new one and deleting the old is ignored.
func (d Document) Records(vhosts ...string) ([]topology.Record, error) {
	keep := keeper(vhosts)
	type key struct{ vhost, spec string }
	newest := map[key]Exchange{}
	gens := map[key]int64{}
	for _, e := range d.Exchanges {
		spec, gen, ok := recordGeneration(e.Name)
		if !ok || !keep(e.Vhost) {
			continue
		}
		k := key{e.Vhost, spec}
		if g, seen := gens[k]; !seen || gen > g {
			gens[k], newest[k] = gen, e
		}
	}
	out := make([]topology.Record, 0, len(newest))
	for _, e := range newest {
		r, err := DecodeRecord(e)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, k int) bool {
		if out[i].Vhost != out[k].Vhost {
			return out[i].Vhost < out[k].Vhost
		}
		return out[i].Spec < out[k].Spec
	})
	return out, nil
}

func keeper(vhosts []string) func(string) bool {
	if len(vhosts) == 0 {
		return func(string) bool { return true }
	}
	set := map[string]bool{}
	for _, v := range vhosts {
		set[v] = true
	}
	return func(v string) bool { return set[v] }
}
