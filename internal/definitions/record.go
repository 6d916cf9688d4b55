package definitions

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/rmqtopo/rmqtopo/topology"
)

// RecordArgument is the exchange argument that holds an ownership record,
// as a JSON string (see topology.RecordPrefix).
const RecordArgument = "rmqtopo-record"

// RecordFormatVersion versions the record's JSON. Version 1 held the
// entries as JSON lists; version 2 holds the same lists gzipped (see
// recordJSON). Both are read; version 2 is written.
const RecordFormatVersion = 2

// recordJSON is the record as stored. Names are grouped by kind and the
// vhost is stated once. Each entry is [name, digest, flags] ([name, key,
// flags] for a binding); flags hold "c" when the spec declares the object
// and "o" when rmqtopo created it for the spec.
type recordJSON struct {
	FormatVersion int    `json:"format_version"`
	Spec          string `json:"spec"`
	Vhost         string `json:"vhost"`
	Generation    int64  `json:"generation"`
	// Entries, in version 2, is the base64 of the gzipped JSON of
	// recordEntries. A record of 45,000 objects is 3.8 MB as plain lists
	// (version 1) and under 0.5 MB so: the broker stores it, sends it in
	// every listing of the vhost's exchanges, and replicates it over a
	// cluster, on each apply that changes it.
	Entries string `json:"entries,omitempty"`
	recordEntries
}

// recordEntries are a record's entries by kind; version 1 held them in
// recordJSON itself.
type recordEntries struct {
	Exchanges [][]string `json:"exchanges,omitempty"`
	Queues    [][]string `json:"queues,omitempty"`
	Policies  [][]string `json:"policies,omitempty"`
	Bindings  [][]string `json:"bindings,omitempty"`
}

// EncodeRecord gives the JSON text of r, in format version 2.
func EncodeRecord(r topology.Record) (string, error) {
	entries, err := json.Marshal(recordEntriesOf(r))
	if err != nil {
		return "", err
	}
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	if _, err := zw.Write(entries); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	j := recordJSON{FormatVersion: RecordFormatVersion, Spec: r.Spec, Vhost: r.Vhost, Generation: r.Generation,
		Entries: base64.StdEncoding.EncodeToString(zipped.Bytes())}
	b, err := json.Marshal(j)
	return string(b), err
}

// recordEntriesOf lists r's objects by kind, each kind sorted.
func recordEntriesOf(r topology.Record) recordEntries {
	all := make(map[topology.Address]bool, len(r.Claims))
	for a := range r.Claims {
		all[a] = true
	}
	for a, ok := range r.Owned {
		if ok {
			all[a] = true
		}
	}
	var j recordEntries
	for _, a := range slices.SortedFunc(maps.Keys(all), topology.Address.Compare) {
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
	return j
}

// decodeRecordJSON parses a record's JSON text, of format version 1 or 2,
// into the version 1 shape: its entries in the struct itself.
func decodeRecordJSON(raw string) (recordJSON, error) {
	var j recordJSON
	if err := json.Unmarshal([]byte(raw), &j); err != nil {
		return j, err
	}
	switch j.FormatVersion {
	case 1:
		return j, nil
	case 2:
	default:
		return j, fmt.Errorf("format_version %d; this rmqtopo reads 1 and 2", j.FormatVersion)
	}
	zipped, err := base64.StdEncoding.DecodeString(j.Entries)
	if err != nil {
		return j, fmt.Errorf("entries: %w", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(zipped))
	if err != nil {
		return j, fmt.Errorf("entries: %w", err)
	}
	if err := json.NewDecoder(zr).Decode(&j.recordEntries); err != nil {
		return j, fmt.Errorf("entries: %w", err)
	}
	return j, nil
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
	j, err := decodeRecordJSON(raw)
	if err != nil {
		return fail("%v", err)
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
