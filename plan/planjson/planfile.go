package planjson

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

// maxPlanBytes bounds a saved plan: one of 150,000 objects is well under.
const maxPlanBytes = 1 << 30

// Kind marks a JSON file as a plan saved by plan --out.
const Kind = "rmqtopo-plan"

// File is a saved plan. Its JSON is fileJSON.
type File struct {
	CreatedAt time.Time
	// Broker is the management URL the plan was made against, for people.
	Broker string
	Vhosts []string
	// Specs names the spec of each vhost: whose ownership record apply
	// writes.
	Specs map[string]string
	// Fingerprint is Fingerprint of the state planned from.
	Fingerprint string
	Prune       bool
	Plan        plan.Plan
	Diagnostics []plan.Diagnostic
}

// fileJSON is the shape of a saved plan (docs/plan-apply.md): the one
// definition of it. Its plan holds every change, no-ops too: apply
// reads what they pin (Change.Pinned, Change.InPolicy).
type fileJSON struct {
	Kind          string            `json:"kind"`
	FormatVersion int               `json:"format_version"`
	CreatedAt     time.Time         `json:"created_at"`
	Broker        string            `json:"broker"`
	Vhosts        []string          `json:"vhosts"`
	Specs         map[string]string `json:"specs"`
	Fingerprint   string            `json:"fingerprint"`
	Prune         bool              `json:"prune"`
	Plan          planJSON          `json:"plan"`
	Diagnostics   []Diagnostic      `json:"diagnostics"`
}

// planJSON is the plan of a saved plan. Its format_version is the
// file's, written again where version 1 wrote it.
type planJSON struct {
	FormatVersion int      `json:"format_version"`
	Changes       []Change `json:"changes"`
	// PolicyConflicts: see plan.Plan.
	PolicyConflicts []PolicyConflict `json:"policy_conflicts,omitempty"`
	RabbitMQ        *Judged          `json:"rabbitmq,omitempty"`
}

func (f *File) json() fileJSON {
	return fileJSON{Kind: Kind, FormatVersion: FormatVersion, CreatedAt: f.CreatedAt, Broker: f.Broker, Vhosts: f.Vhosts,
		Specs: f.Specs, Fingerprint: f.Fingerprint, Prune: f.Prune, Diagnostics: diagnosticsJSON(f.Diagnostics),
		Plan: planJSON{FormatVersion: FormatVersion, Changes: jsonChanges(f.Plan.Changes),
			PolicyConflicts: conflictsJSON(f.Plan.PolicyConflicts), RabbitMQ: (*Judged)(f.Plan.RabbitMQ)}}
}

func (j *fileJSON) file() *File {
	return &File{CreatedAt: j.CreatedAt, Broker: j.Broker, Vhosts: j.Vhosts, Specs: j.Specs, Fingerprint: j.Fingerprint,
		Prune: j.Prune, Diagnostics: planDiagnostics(j.Diagnostics),
		Plan: plan.Plan{Changes: planChanges(j.Plan.Changes), PolicyConflicts: planConflicts(j.Plan.PolicyConflicts),
			RabbitMQ: (*plan.Judged)(j.Plan.RabbitMQ)}}
}

// New describes plan p, made from st against the broker at brokerURL.
func New(brokerURL string, st *topology.State, specs map[string]string, prune bool, p plan.Plan, diags []plan.Diagnostic) *File {
	if diags == nil {
		diags = []plan.Diagnostic{}
	}
	return &File{CreatedAt: time.Now().UTC().Round(time.Second),
		Broker: brokerURL, Vhosts: st.Vhosts, Specs: specs, Fingerprint: Fingerprint(st), Prune: prune, Plan: p, Diagnostics: diags}
}

// Write saves f to path atomically: written then renamed, so that a crash
// never leaves half a plan to apply.
func (f *File) Write(path string) error {
	b, err := json.MarshalIndent(f.json(), "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".rmqtopo-plan-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Stale reports whether st, the state read now, differs from the one the
// plan was made from.
func (f *File) Stale(st *topology.State) bool { return Fingerprint(st) != f.Fingerprint }

// Read returns the plan saved in path, or nil if path is not a saved plan
// (a spec: spec files may be JSON too, so the "kind" decides). An
// unreadable path is nil too, for the spec loader to report in its words.
func Read(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil
	}
	defer f.Close()
	// Look at the start first: anything but JSON (/dev/zero, say) is left
	// to the spec loader, which bounds what it reads.
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	if !bytes.HasPrefix(bytes.TrimSpace(head[:n]), []byte("{")) {
		return nil, nil
	}
	rest, err := io.ReadAll(io.LimitReader(f, maxPlanBytes))
	if err != nil {
		return nil, nil
	}
	data := append(head[:n], rest...)
	if len(data) > maxPlanBytes {
		return nil, fmt.Errorf("%s: larger than %d MiB, which no saved plan is", path, maxPlanBytes>>20)
	}
	var probe struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(data, &probe) != nil || probe.Kind != Kind {
		if strings.HasSuffix(path, ".json") && !looksLikeSpec(data) {
			return nil, &NotAPlanError{Path: path}
		}
		return nil, nil
	}
	return decode(path, data)
}

// NotAPlanError is a JSON file given where a saved plan or a spec was
// expected: it is neither.
type NotAPlanError struct{ Path string }

func (e *NotAPlanError) Error() string { return e.Path + " is JSON but not a saved plan" }

func decode(path string, data []byte) (*File, error) {
	var j fileJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&j); err != nil {
		return nil, fmt.Errorf("read plan %s: %w", path, err)
	}
	if j.FormatVersion != FormatVersion || j.Plan.FormatVersion != FormatVersion {
		return nil, fmt.Errorf("%s has plan format %d/%d; this rmqtopo reads %d/%d: plan again with this version",
			path, j.FormatVersion, j.Plan.FormatVersion, FormatVersion, FormatVersion)
	}
	f := j.file()
	if f.Fingerprint == "" || len(f.Vhosts) == 0 {
		return nil, fmt.Errorf("%s lacks its fingerprint or vhosts", path)
	}
	// JSON numbers come back as json.Number; arguments must be the
	// canonical int64/float64 the broker is sent.
	for i := range f.Plan.Changes {
		normalizeObject(f.Plan.Changes[i].Before)
		normalizeObject(f.Plan.Changes[i].After)
	}
	return f, nil
}

func looksLikeSpec(data []byte) bool {
	var probe struct {
		Version any `json:"version"`
	}
	return json.Unmarshal(data, &probe) == nil && probe.Version != nil
}

func normalizeObject(o *plan.Object) {
	if o == nil {
		return
	}
	if o.Exchange != nil {
		o.Exchange.Arguments = topology.NormalizeArgs(o.Exchange.Arguments)
	}
	if o.Queue != nil {
		o.Queue.Arguments = topology.NormalizeArgs(o.Queue.Arguments)
	}
	if o.Binding != nil {
		o.Binding.Arguments = topology.NormalizeArgs(o.Binding.Arguments)
	}
	if o.Policy != nil {
		o.Policy.Definition = topology.NormalizeArgs(o.Policy.Definition)
	}
}

// Fingerprint identifies the state a plan was made from: the topology and
// the ownership records of its vhosts (what they own, and the generation
// of each, which every write of a record changes). Message counts are left out because
// they change all the time; apply re-reads them for every change that
// could destroy messages.
func Fingerprint(st *topology.State) string {
	owned := make([]topology.Address, 0, len(st.Owned))
	for a, ok := range st.Owned {
		if ok {
			owned = append(owned, a)
		}
	}
	sort.Slice(owned, func(i, j int) bool {
		if owned[i].Kind != owned[j].Kind {
			return owned[i].Kind < owned[j].Kind
		}
		return owned[i].Less(owned[j])
	})
	t := st.Topology
	t.Sort()
	var records []string
	for _, r := range st.Records {
		records = append(records, fmt.Sprintf("%s %s", r.Vhost, r.ExchangeName()))
	}
	sort.Strings(records)
	b, err := json.Marshal(struct {
		Vhosts   []string           `json:"vhosts"`
		Topology topology.Topology  `json:"topology"`
		Owned    []topology.Address `json:"owned"`
		Records  []string           `json:"records,omitempty"`
	}{st.Vhosts, t, owned, records})
	if err != nil {
		// Only unencodable argument values fail, and those cannot come
		// from a broker's JSON.
		panic(fmt.Sprintf("planjson: fingerprint: %v", err))
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
